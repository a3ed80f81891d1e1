// The array file formats (runtime/io): .npy and safetensors round trips for
// every dtype and awkward shapes, files hand-crafted byte by byte as numpy and
// safetensors write them, and one test per kind of bad input. Every bad file
// must be refused with a one-line error naming it, and a failed write must
// leave nothing behind.
#include "io/Npy.h"
#include "io/Safetensors.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

using namespace rnnc::io;
namespace fs = std::filesystem;

namespace {

/// A fresh directory, removed with its content at the end of the test.
struct TempDir {
  fs::path dir;
  TempDir() {
    static std::atomic<int> counter{0};
    dir = fs::temp_directory_path() / ("rnnc-io-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir, ec);
  }
  std::string operator/(const std::string &name) const { return (dir / name).string(); }
  /// The names in the directory, sorted: shows stray temporary files.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string readBytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string le(uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

template <typename T> std::string raw(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s.append(b, sizeof(T));
  }
  return s;
}

/// A .npy file as numpy writes it: magic, version, length, the dict padded
/// with spaces and a '\n' to a multiple of 64, then `data`.
std::string npyFile(const std::string &dict, const std::string &data, int major = 1) {
  size_t start = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((start + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  return std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0' + le(header.size(), major == 1 ? 2 : 4) + header + data;
}

std::string npyDict(const std::string &descr, const std::string &shape, const std::string &fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

/// A safetensors file: header length, `header` as given, `data`.
std::string safetensorsFile(const std::string &header, const std::string &data) {
  return le(header.size(), 8) + header + data;
}

/// The error readNpy gives for `bytes` (and that it gives one).
std::string npyError(const TempDir &tmp, const std::string &bytes) {
  std::string path = tmp / "x.npy";
  writeBytes(path, bytes);
  std::string error;
  auto a = readNpy(path, error);
  CHECK_FALSE(a);
  CHECK(error.rfind(path + ": ", 0) == 0);
  CHECK(error.find('\n') == std::string::npos);
  return error;
}

std::string safetensorsError(const TempDir &tmp, const std::string &bytes) {
  std::string path = tmp / "x.safetensors";
  writeBytes(path, bytes);
  std::string error;
  auto t = readSafetensors(path, error);
  CHECK_FALSE(t);
  CHECK(error.rfind(path + ": ", 0) == 0);
  CHECK(error.find('\n') == std::string::npos);
  return error;
}

/// `count` values exactly representable in every dtype, with a sign change.
std::vector<double> sample(int64_t count) {
  std::vector<double> v;
  for (int64_t i = 0; i < count; ++i) v.push_back(static_cast<double>(i * 3 - 7));
  return v;
}

Array makeArray(DType dtype, std::vector<int64_t> shape) {
  Array a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data = sample(a.elements());
  return a;
}

bool sameBits(const std::vector<double> &a, const std::vector<double> &b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

const DType kAllDtypes[] = {DType::F32, DType::F64, DType::I32, DType::I64};
const std::vector<int64_t> kShapes[] = {{}, {0}, {3, 0}, {0, 5, 2}, {5}, {3, 4}, {2, 3, 4}};

}  // namespace

// ---------------------------------------------------------------------------
// .npy: good files
// ---------------------------------------------------------------------------

TEST_CASE("io: npy round trip for every dtype and shape", "[io]") {
  TempDir tmp;
  for (DType dtype : kAllDtypes) {
    for (const auto &shape : kShapes) {
      INFO(dtypeName(dtype) << " " << shapeText(shape));
      Array a = makeArray(dtype, shape);
      std::string error, path = tmp / "a.npy";
      REQUIRE(writeNpy(path, a, error));
      CHECK(error.empty());
      std::string bytes = readBytes(path);
      uint64_t headerLength = static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8;
      CHECK(bytes[6] == 1);
      CHECK((10 + headerLength) % 64 == 0);
      CHECK(bytes.size() == 10 + headerLength + a.data.size() * dtypeSize(dtype));
      auto b = readNpy(path, error);
      REQUIRE(b);
      CHECK(b->dtype == dtype);
      CHECK(b->shape == shape);
      CHECK(b->data == a.data);
    }
  }
  CHECK(tmp.listing() == std::vector<std::string>{"a.npy"});
}

TEST_CASE("io: npy writes numpy's exact header text", "[io]") {
  TempDir tmp;
  std::string error;
  auto header = [&](const Array &a) {
    REQUIRE(writeNpy(tmp / "h.npy", a, error));
    std::string bytes = readBytes(tmp / "h.npy");
    return bytes.substr(10, bytes.find('\n') - 10 + 1);
  };
  std::string h = header(makeArray(DType::F32, {3, 4}));
  CHECK(h.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", 0) == 0);
  CHECK(h.back() == '\n');
  CHECK(header(makeArray(DType::I64, {5})).rfind("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }", 0) == 0);
  CHECK(header(makeArray(DType::F64, {})).rfind("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", 0) == 0);
  CHECK(header(makeArray(DType::I32, {0, 2})).rfind("{'descr': '<i4', 'fortran_order': False, 'shape': (0, 2), }", 0) == 0);
}

TEST_CASE("io: npy keeps special values and rounds to float32", "[io]") {
  TempDir tmp;
  std::string error;
  Array a;
  a.dtype = DType::F64;
  a.shape = {5};
  a.data = {std::nan(""), HUGE_VAL, -HUGE_VAL, -0.0, 0.1};
  REQUIRE(writeNpy(tmp / "s.npy", a, error));
  auto b = readNpy(tmp / "s.npy", error);
  REQUIRE(b);
  CHECK(sameBits(a.data, b->data));

  a.dtype = DType::F32;
  a.data = {0.1, 1e300, -1e300, 3.4028234663852886e38, 1e-50};
  REQUIRE(writeNpy(tmp / "f.npy", a, error));
  b = readNpy(tmp / "f.npy", error);
  REQUIRE(b);
  CHECK(b->data[0] == static_cast<double>(0.1f));
  CHECK(b->data[1] == HUGE_VAL);
  CHECK(b->data[2] == -HUGE_VAL);
  CHECK(b->data[3] == static_cast<double>(std::numeric_limits<float>::max()));
  CHECK(b->data[4] == 0.0);

  a.dtype = DType::I64;
  a.shape = {3};
  a.data = {9007199254740992.0, -9007199254740992.0, -9223372036854775808.0};
  REQUIRE(writeNpy(tmp / "i.npy", a, error));
  b = readNpy(tmp / "i.npy", error);
  REQUIRE(b);
  CHECK(b->data == a.data);
}

TEST_CASE("io: npy reads hand-made version 1, 2 and 3 files", "[io]") {
  TempDir tmp;
  std::string error;
  std::string data;
  for (int i = 0; i < 12; ++i) data += raw<float>({static_cast<float>(i) / 2});
  for (int major : {1, 2, 3}) {
    INFO("version " << major);
    writeBytes(tmp / "v.npy", npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", data, major));
    auto a = readNpy(tmp / "v.npy", error);
    REQUIRE(a);
    CHECK(a->dtype == DType::F32);
    CHECK(a->shape == std::vector<int64_t>{3, 4});
    REQUIRE(a->data.size() == 12);
    CHECK(a->data[11] == 5.5);
  }
}

TEST_CASE("io: npy accepts the header's harmless variations", "[io]") {
  TempDir tmp;
  std::string error;
  std::string ints = raw<int32_t>({1, -2, 3});
  const char *dicts[] = {
      "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (3,)}",  // double quotes, no trailing comma
      "{'shape': (3,), 'fortran_order': False, 'descr': '<i4'}",            // any key order
      "{'descr':'=i4','fortran_order':False,'shape':(3,),}",                // '=' native order, no spaces
      "{'descr': '|i4', 'fortran_order': False, 'shape': (3L,), }",        // '|', Python 2's long suffix
      "{ 'descr' : '<i4' ,\t'fortran_order' : False , 'shape' : ( 3 , ) }",
  };
  for (const char *dict : dicts) {
    INFO(dict);
    writeBytes(tmp / "h.npy", npyFile(dict, ints));
    auto a = readNpy(tmp / "h.npy", error);
    REQUIRE(a);
    CHECK(a->dtype == DType::I32);
    CHECK(a->data == std::vector<double>{1, -2, 3});
  }
  // An unpadded header (numpy before 1.9 aligned to 16, others not at all).
  std::string dict = npyDict("<f8", "()") + "\n";
  writeBytes(tmp / "u.npy", std::string("\x93NUMPY\x01\x00", 8) + le(dict.size(), 2) + dict + raw<double>({2.5}));
  auto a = readNpy(tmp / "u.npy", error);
  REQUIRE(a);
  CHECK(a->shape.empty());
  CHECK(a->data == std::vector<double>{2.5});
}

// ---------------------------------------------------------------------------
// .npy: bad files, one test per kind
// ---------------------------------------------------------------------------

TEST_CASE("io: npy refuses a bad magic", "[io]") {
  TempDir tmp;
  CHECK_THAT(npyError(tmp, "PK\x03\x04 this is a zip file, not an array"), Catch::Contains("bad magic"));
  CHECK_THAT(npyError(tmp, ""), Catch::Contains("bad magic"));
  CHECK_THAT(npyError(tmp, "\x93NUM"), Catch::Contains("bad magic"));
}

TEST_CASE("io: npy refuses a truncated header", "[io]") {
  TempDir tmp;
  CHECK_THAT(npyError(tmp, std::string("\x93NUMPY\x01", 7)), Catch::Contains("truncated header"));
  CHECK_THAT(npyError(tmp, std::string("\x93NUMPY\x01\x00\x76", 9)), Catch::Contains("truncated header"));
  CHECK_THAT(npyError(tmp, std::string("\x93NUMPY\x02\x00\x76\x00", 10)), Catch::Contains("truncated header"));
  std::string file = npyFile(npyDict("<f4", "(3,)"), raw<float>({1, 2, 3}));
  CHECK_THAT(npyError(tmp, file.substr(0, 40)), Catch::Contains("runs past the end of the file"));
}

TEST_CASE("io: npy refuses a header length past the end of the file", "[io]") {
  TempDir tmp;
  std::string dict = npyDict("<f4", "(3,)");
  CHECK(npyError(tmp, std::string("\x93NUMPY\x01\x00", 8) + le(0xffff, 2) + dict) ==
        tmp / "x.npy" + ": the header length 65535 runs past the end of the file (67 bytes)");
  CHECK_THAT(npyError(tmp, std::string("\x93NUMPY\x02\x00", 8) + le(0xffffffffu, 4) + dict),
             Catch::Contains("header length 4294967295 runs past the end"));
}

TEST_CASE("io: npy refuses unknown versions", "[io]") {
  TempDir tmp;
  std::string good = npyFile(npyDict("<f4", "(1,)"), raw<float>({1}));
  for (auto version : {std::string("\x04\x00", 2), std::string("\x01\x01", 2), std::string("\x00\x00", 2)}) {
    std::string bad = good;
    bad.replace(6, 2, version);
    CHECK_THAT(npyError(tmp, bad), Catch::Contains("unsupported .npy version"));
  }
}

TEST_CASE("io: npy refuses a shape that does not match the data", "[io]") {
  TempDir tmp;
  std::string data(400, '\0');
  CHECK(npyError(tmp, npyFile(npyDict("<f4", "(10, 20)"), data)) ==
        tmp / "x.npy" + ": data is 400 bytes, the header's shape [10, 20] of float32 needs 800");
  CHECK(npyError(tmp, npyFile(npyDict("<f8", "(10,)"), data)) ==
        tmp / "x.npy" + ": data is 400 bytes, the header's shape [10] of float64 needs 80");
  CHECK_THAT(npyError(tmp, npyFile(npyDict("<f8", "()"), "")), Catch::Contains("data is 0 bytes"));
  CHECK_THAT(npyError(tmp, npyFile(npyDict("<f8", "(0,)"), "x")), Catch::Contains("data is 1 bytes"));
}

TEST_CASE("io: npy refuses a shape whose size overflows", "[io]") {
  TempDir tmp;
  CHECK_THAT(npyError(tmp, npyFile(npyDict("<f4", "(1099511627776, 1099511627776)"), "")),
             Catch::Contains("more bytes than an int64 holds"));
  CHECK_THAT(npyError(tmp, npyFile(npyDict("<f8", "(4611686018427387904,)"), "")),
             Catch::Contains("more bytes than an int64 holds"));
  CHECK_THAT(npyError(tmp, npyFile(npyDict("<f8", "(99999999999999999999,)"), "")), Catch::Contains("too large for int64"));
  std::string dims;
  for (int i = 0; i < 65; ++i) dims += "1, ";
  CHECK_THAT(npyError(tmp, npyFile(npyDict("<f8", "(" + dims + ")"), raw<double>({1}))), Catch::Contains("more than 64 dims"));
}

TEST_CASE("io: npy refuses a negative dim", "[io]") {
  TempDir tmp;
  CHECK_THAT(npyError(tmp, npyFile(npyDict("<f4", "(3, -1)"), raw<float>({1, 2, 3}))), Catch::Contains("negative dim"));
}

TEST_CASE("io: npy refuses Fortran order", "[io]") {
  TempDir tmp;
  CHECK_THAT(npyError(tmp, npyFile(npyDict("<f4", "(1,)", "True"), raw<float>({1}))),
             Catch::Contains("Fortran order is not supported"));
}

TEST_CASE("io: npy refuses big-endian data", "[io]") {
  TempDir tmp;
  CHECK_THAT(npyError(tmp, npyFile(npyDict(">f4", "(1,)"), raw<float>({1}))), Catch::Contains("big-endian"));
  CHECK_THAT(npyError(tmp, npyFile(npyDict(">i8", "(1,)"), raw<int64_t>({1}))), Catch::Contains("'>i8'"));
}

TEST_CASE("io: npy refuses unknown dtypes", "[io]") {
  TempDir tmp;
  for (const char *descr : {"<f2", "|u1", "<u4", "<c16", "|b1", "<U10", "f4", "<f4 ", "|O"}) {
    INFO(descr);
    CHECK_THAT(npyError(tmp, npyFile(npyDict(descr, "(1,)"), raw<float>({1}))), Catch::Contains("unsupported dtype"));
  }
  CHECK_THAT(npyError(tmp, npyFile("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", raw<float>({1}))),
             Catch::Contains("malformed header"));
}

TEST_CASE("io: npy refuses malformed header dicts", "[io]") {
  TempDir tmp;
  std::string one = raw<float>({1});
  struct Case {
    std::string dict, message;
  };
  const Case cases[] = {
      {"{'descr': '<f4', 'fortran_order': False}", "lacks the key 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "malformed header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': (1,)}", "unknown key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "key 'descr' twice"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "malformed header"},
      {"{'descr': '<f4', 'fortran_order': 'False', 'shape': (1,)}", "fortran_order is not True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", "is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "malformed header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': '(1,)'}", "shape is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1.0,)}", "malformed header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", "unexpected text after the dict"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", "malformed header"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", "malformed header"},
      {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,)}", "malformed header"},
      {"__import__('os').system('true')", "malformed header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", "malformed header"},
      {"", "malformed header"},
      {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\0", 56), "unexpected text"},
  };
  for (const Case &c : cases) {
    INFO(c.dict);
    CHECK_THAT(npyError(tmp, npyFile(c.dict, one)), Catch::Contains(c.message));
  }
}

TEST_CASE("io: npy refuses what is not a regular file", "[io]") {
  TempDir tmp;
  std::string error;
  CHECK_FALSE(readNpy(tmp / "missing.npy", error));
  CHECK(error == tmp / "missing.npy" + ": cannot open: No such file or directory");
  CHECK_FALSE(readNpy(tmp.dir.string(), error));
  CHECK_THAT(error, Catch::Contains("is a directory"));
  CHECK_FALSE(readNpy("/dev/null", error));
  CHECK(error == "/dev/null: not a regular file");
  REQUIRE(::mkfifo((tmp / "fifo").c_str(), 0600) == 0);
  CHECK_FALSE(readNpy(tmp / "fifo", error));  // must not wait for a writer
  CHECK_THAT(error, Catch::Contains("not a regular file"));
  CHECK_FALSE(readSafetensors(tmp / "fifo", error));
  CHECK_THAT(error, Catch::Contains("not a regular file"));
}

// ---------------------------------------------------------------------------
// .npy: writing
// ---------------------------------------------------------------------------

TEST_CASE("io: npy refuses to write an inconsistent array and writes nothing", "[io]") {
  TempDir tmp;
  std::string error;
  Array a = makeArray(DType::F32, {2, 3});
  a.data.pop_back();
  CHECK_FALSE(writeNpy(tmp / "a.npy", a, error));
  CHECK_THAT(error, Catch::Contains("array has 5 values, its shape [2, 3] needs 6"));
  a = makeArray(DType::I32, {2});
  a.data[1] = 0.5;
  CHECK_FALSE(writeNpy(tmp / "a.npy", a, error));
  CHECK_THAT(error, Catch::Contains("value 0.5 at index 1 is not an int32"));
  a.data[1] = 2147483648.0;
  CHECK_FALSE(writeNpy(tmp / "a.npy", a, error));
  a.data[1] = std::nan("");
  CHECK_FALSE(writeNpy(tmp / "a.npy", a, error));
  a = makeArray(DType::I64, {1});
  a.data[0] = 9223372036854775808.0;
  CHECK_FALSE(writeNpy(tmp / "a.npy", a, error));
  a.shape = {-1};
  CHECK_FALSE(writeNpy(tmp / "a.npy", a, error));
  CHECK_THAT(error, Catch::Contains("negative dim"));
  a.shape = {1ll << 40, 1ll << 40};
  CHECK_FALSE(writeNpy(tmp / "a.npy", a, error));
  CHECK_THAT(error, Catch::Contains("more bytes than an int64 holds"));
  CHECK(tmp.listing().empty());
}

TEST_CASE("io: a write that fails leaves no file and keeps the old one", "[io]") {
  TempDir tmp;
  std::string error;
  Array a = makeArray(DType::F64, {4});
  // A directory that does not exist.
  CHECK_FALSE(writeNpy(tmp / "no/such/dir/a.npy", a, error));
  CHECK_THAT(error, Catch::Contains("cannot create a file in"));
  CHECK_FALSE(writeSafetensors(tmp / "no/such/dir/a.safetensors", {{"w", a}}, error));
  CHECK_THAT(error, Catch::Contains("cannot create a file in"));
  // The target is a directory: the temporary file is written, the rename fails.
  fs::create_directory(tmp.dir / "target");
  CHECK_FALSE(writeNpy(tmp / "target", a, error));
  CHECK_THAT(error, Catch::Contains("cannot rename"));
  CHECK_FALSE(writeSafetensors(tmp / "target", {{"w", a}}, error));
  CHECK(tmp.listing() == std::vector<std::string>{"target"});
  CHECK(fs::is_empty(tmp.dir / "target"));
  // A bad array over a good file leaves the good file as it was.
  REQUIRE(writeNpy(tmp / "keep.npy", a, error));
  std::string before = readBytes(tmp / "keep.npy");
  Array bad = a;
  bad.data.push_back(1);
  CHECK_FALSE(writeNpy(tmp / "keep.npy", bad, error));
  CHECK(readBytes(tmp / "keep.npy") == before);
  // A directory without write permission (root ignores the mode, so only as a user).
  if (::geteuid() != 0) {
    fs::create_directory(tmp.dir / "ro");
    fs::permissions(tmp.dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_FALSE(writeNpy(tmp / "ro/a.npy", a, error));
    CHECK_THAT(error, Catch::Contains("Permission denied"));
    CHECK_FALSE(writeSafetensors(tmp / "ro/a.safetensors", {{"w", a}}, error));
    fs::permissions(tmp.dir / "ro", fs::perms::owner_all);
    CHECK(fs::is_empty(tmp.dir / "ro"));
  }
}

// ---------------------------------------------------------------------------
// safetensors: good files
// ---------------------------------------------------------------------------

TEST_CASE("io: safetensors round trip for every dtype and shape", "[io]") {
  TempDir tmp;
  std::vector<Tensor> tensors;
  int i = 0;
  for (DType dtype : kAllDtypes)
    for (const auto &shape : kShapes) tensors.push_back({"t" + std::to_string(i++) + "." + dtypeName(dtype), makeArray(dtype, shape)});
  std::string error, path = tmp / "p.safetensors";
  REQUIRE(writeSafetensors(path, tensors, error));
  std::string bytes = readBytes(path);
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = n << 8 | static_cast<uint8_t>(bytes[b]);
  CHECK(n % 8 == 0);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  CHECK(header.size() == tensors.size());
  CHECK(header["t1.float32"]["data_offsets"] == nlohmann::json::array({4, 4}));
  CHECK(header["t0.float32"]["shape"] == nlohmann::json::array());

  auto back = readSafetensors(path, error);
  REQUIRE(back);
  REQUIRE(back->size() == tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    INFO(tensors[k].name);
    CHECK((*back)[k].name == tensors[k].name);  // written in the order given, read in offset order
    CHECK((*back)[k].array.dtype == tensors[k].array.dtype);
    CHECK((*back)[k].array.shape == tensors[k].array.shape);
    CHECK((*back)[k].array.data == tensors[k].array.data);
  }
  CHECK(tmp.listing() == std::vector<std::string>{"p.safetensors"});

  REQUIRE(writeSafetensors(tmp / "empty.safetensors", {}, error));
  auto none = readSafetensors(tmp / "empty.safetensors", error);
  REQUIRE(none);
  CHECK(none->empty());
}

TEST_CASE("io: safetensors reads a hand-made file in offset order", "[io]") {
  TempDir tmp;
  std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("a":{"dtype":"F64","shape":[],"data_offsets":[16,24]},"c":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})";
  header += std::string((8 - header.size() % 8) % 8, ' ');
  writeBytes(tmp / "h.safetensors", safetensorsFile(header, raw<float>({5, 6}) + raw<float>({1, 2}) + raw<double>({0.25})));
  std::string error;
  auto t = readSafetensors(tmp / "h.safetensors", error);
  REQUIRE(t);
  REQUIRE(t->size() == 3);
  CHECK((*t)[0].name == "c");
  CHECK((*t)[0].array.data == std::vector<double>{5, 6});
  CHECK((*t)[1].name == "b");
  CHECK((*t)[1].array.data == std::vector<double>{1, 2});
  CHECK((*t)[2].name == "a");
  CHECK((*t)[2].array.dtype == DType::F64);
  CHECK((*t)[2].array.shape.empty());
  CHECK((*t)[2].array.data == std::vector<double>{0.25});
}

// ---------------------------------------------------------------------------
// safetensors: bad files, one test per kind
// ---------------------------------------------------------------------------

namespace {
std::string entry(const std::string &dtype, const std::string &shape, const std::string &offsets) {
  return R"({"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}";
}
}  // namespace

TEST_CASE("io: safetensors refuses a header length past the end of the file", "[io]") {
  TempDir tmp;
  CHECK_THAT(safetensorsError(tmp, "abc"), Catch::Contains("too short for the 8-byte header length"));
  CHECK(safetensorsError(tmp, le(100, 8) + "{}") == tmp / "x.safetensors" + ": the header length 100 runs past the end of the file (10 bytes)");
  CHECK_THAT(safetensorsError(tmp, le(~0ull, 8) + "{}"), Catch::Contains("runs past the end of the file"));
  // Over 100 MB, in a sparse file that really is that long.
  std::string path = tmp / "big.safetensors";
  writeBytes(path, le(100'000'001, 8) + "{}");
  REQUIRE(::truncate(path.c_str(), 100'000'100) == 0);
  std::string error;
  CHECK_FALSE(readSafetensors(path, error));
  CHECK_THAT(error, Catch::Contains("more than the limit of 100000000"));
}

TEST_CASE("io: safetensors refuses invalid JSON", "[io]") {
  TempDir tmp;
  CHECK_THAT(safetensorsError(tmp, safetensorsFile("{\"a\": ", "")), Catch::Contains("not valid JSON"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile("{} junk", "")), Catch::Contains("not valid JSON"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(std::string("{}\0\0\0\0\0\0", 8), "")), Catch::Contains("not valid JSON"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile("[1, 2]", "")), Catch::Contains("does not start with '{'"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(" {}", "")), Catch::Contains("does not start with '{'"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile("", "")), Catch::Contains("does not start with '{'"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"a": 1})", "")), Catch::Contains("tensor 'a': entry is not an object"));
  std::string deep(100000, '[');
  CHECK_THAT(safetensorsError(tmp, safetensorsFile("{\"a\":" + deep, "")), Catch::Contains("not valid JSON"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"__metadata__": {"format": 1}})", "")),
             Catch::Contains("__metadata__ is not a map of strings to strings"));
}

TEST_CASE("io: safetensors refuses malformed entries", "[io]") {
  TempDir tmp;
  std::string four = raw<float>({1});
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":{"dtype":"F32","shape":[1]}})", four)),
             Catch::Contains("needs dtype, shape and data_offsets"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[1]", "[0,4]").insert(1, R"("x":1,)") + "}", four)),
             Catch::Contains("unknown key 'x'"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[-1]", "[0,4]") + "}", four)),
             Catch::Contains("not a non-negative integer"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[1.0]", "[0,4]") + "}", four)),
             Catch::Contains("not a non-negative integer"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "1", "[0,4]") + "}", four)),
             Catch::Contains("shape is not an array"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[1]", "[0,4,8]") + "}", four)),
             Catch::Contains("is not [begin, end]"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[1]", "[-4,4]") + "}", four)),
             Catch::Contains("is not [begin, end]"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[1099511627776,1099511627776]", "[0,4]") + "}", four)),
             Catch::Contains("more bytes than an int64 holds"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[18446744073709551615]", "[0,4]") + "}", four)),
             Catch::Contains("not a non-negative integer"));
}

TEST_CASE("io: safetensors refuses offsets out of range", "[io]") {
  TempDir tmp;
  std::string eight = raw<float>({1, 2});
  CHECK(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[2]", "[4,12]") + "}", eight)) ==
        tmp / "x.safetensors" + ": tensor 'w': data_offsets [4, 12] run past the data, which is 8 bytes");
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[0]", "[8,4]") + "}", eight)),
             Catch::Contains("end before they begin"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[2]", "[18446744073709551600,18446744073709551608]") + "}", eight)),
             Catch::Contains("is not [begin, end]"));
}

TEST_CASE("io: safetensors refuses a size that does not match the shape", "[io]") {
  TempDir tmp;
  std::string eight = raw<float>({1, 2});
  CHECK(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[3]", "[0,8]") + "}", eight)) ==
        tmp / "x.safetensors" + ": tensor 'w': data_offsets [0, 8] hold 8 bytes, shape [3] of F32 needs 12");
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F64", "[2]", "[0,8]") + "}", eight)),
             Catch::Contains("needs 16"));
}

TEST_CASE("io: safetensors refuses overlapping offsets and holes", "[io]") {
  TempDir tmp;
  std::string sixteen = raw<float>({1, 2, 3, 4});
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"a":)" + entry("F32", "[2]", "[0,8]") + R"(,"b":)" +
                                                       entry("F32", "[2]", "[4,12]") + R"(,"c":)" + entry("F32", "[1]", "[12,16]") + "}",
                                                   sixteen)),
             Catch::Contains("tensor 'b' (bytes [4, 12]) overlaps tensor 'a' (bytes [0, 8])"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"a":)" + entry("F32", "[2]", "[0,8]") + R"(,"b":)" +
                                                       entry("F32", "[2]", "[0,8]") + "}",
                                                   sixteen.substr(0, 8))),
             Catch::Contains("overlaps"));
  // A hole between tensors, before the first, and after the last.
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"a":)" + entry("F32", "[1]", "[0,4]") + R"(,"b":)" +
                                                       entry("F32", "[2]", "[8,16]") + "}",
                                                   sixteen)),
             Catch::Contains("bytes [4, 8] of the data belong to no tensor"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"a":)" + entry("F32", "[3]", "[4,16]") + "}", sixteen)),
             Catch::Contains("bytes [0, 4] of the data belong to no tensor"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"a":)" + entry("F32", "[3]", "[0,12]") + "}", sixteen)),
             Catch::Contains("bytes [12, 16] of the data belong to no tensor"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile("{}", sixteen)), Catch::Contains("bytes [0, 16] of the data belong to no tensor"));
}

TEST_CASE("io: safetensors refuses unknown dtypes", "[io]") {
  TempDir tmp;
  for (const char *dtype : {"BF16", "F16", "U8", "BOOL", "F8_E4M3", "f32", ""}) {
    INFO(dtype);
    CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry(dtype, "[2]", "[0,4]") + "}", "abcd")),
               Catch::Contains(std::string("dtype ") + dtype + " is not supported"));
  }
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", "abcd")),
             Catch::Contains("dtype is not a string"));
}

TEST_CASE("io: safetensors refuses duplicate names", "[io]") {
  TempDir tmp;
  std::string eight = raw<float>({1, 2});
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":)" + entry("F32", "[1]", "[0,4]") + R"(,"w":)" +
                                                       entry("F32", "[1]", "[4,8]") + "}",
                                                   eight)),
             Catch::Contains("header has the key 'w' twice"));
  CHECK_THAT(safetensorsError(tmp, safetensorsFile(R"({"w":{"dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8]}})", eight)),
             Catch::Contains("header has the key 'dtype' twice"));

  std::string error;
  Array a = makeArray(DType::F32, {1});
  CHECK_FALSE(writeSafetensors(tmp / "d.safetensors", {{"w", a}, {"w", a}}, error));
  CHECK_THAT(error, Catch::Contains("two tensors are named 'w'"));
  CHECK_FALSE(writeSafetensors(tmp / "d.safetensors", {{"", a}}, error));
  CHECK_THAT(error, Catch::Contains("empty name"));
  CHECK_FALSE(writeSafetensors(tmp / "d.safetensors", {{"__metadata__", a}}, error));
  CHECK_FALSE(writeSafetensors(tmp / "d.safetensors", {{"\xff\xfe", a}}, error));
  CHECK_THAT(error, Catch::Contains("not valid UTF-8"));
  Array bad = a;
  bad.data.clear();
  CHECK_FALSE(writeSafetensors(tmp / "d.safetensors", {{"w", bad}}, error));
  CHECK_THAT(error, Catch::Contains("tensor 'w': array has 0 values"));
  CHECK(tmp.listing().size() == 1);  // only x.safetensors from the reads above
}

TEST_CASE("writeFileAtomically removes what killed writers of the same file left", "[io]") {
  TempDir tmp;
  const std::string path = tmp / "c.ckpt";
  // A pid above the kernel's pid_max never runs; our own pid is alive.
  const std::string dead = ".c.ckpt.4194305-3.rnnc-tmp", alive = ".c.ckpt." + std::to_string(::getpid()) + "-99.rnnc-tmp";
  for (const std::string &name : {dead, alive, std::string(".other.4194305-0.rnnc-tmp"), std::string("c.ckpt.4194305-0.rnnc-tmp")})
    writeBytes(tmp / name, "half a checkpoint");
  std::string error;
  REQUIRE(rnnc::io::writeFileAtomically(path, "whole", error));
  CHECK(readBytes(path) == "whole");
  // Gone: the dead writer's file of this name. Kept: a live writer's, another file's, and a name not ours.
  CHECK(tmp.listing() == std::vector<std::string>{alive, ".other.4194305-0.rnnc-tmp", "c.ckpt", "c.ckpt.4194305-0.rnnc-tmp"});
}

// .npy reading and writing.
//
// Reading, in order, touching nothing the file has not yet earned:
//   1. open: a regular file of at most kMaxFileBytes;
//   2. the prefix: magic "\x93NUMPY", version 1.0 / 2.0 / 3.0, header length
//      (2 bytes for 1.0, 4 for the others) that ends within the file;
//   3. the header: a Python dict literal parsed by hand (no eval) with exactly
//      the keys descr, fortran_order and shape;
//   4. the shape's byte count, overflow-checked, equal to what follows the
//      header; only then is the data read, in chunks, into doubles.
#include "io/Npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string_view>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the .npy and .safetensors code assumes a little-endian host");

namespace rnnc::io {

// ---------------------------------------------------------------------------
// .npy
// ---------------------------------------------------------------------------

namespace {

constexpr std::string_view kMagic("\x93NUMPY", 6);
constexpr uint64_t kMaxHeaderBytes = 1 << 20;  // numpy itself refuses more than 10000 by default
constexpr size_t kMaxDims = 64;                 // NPY_MAXDIMS in numpy 2
constexpr uint64_t kChunkBytes = 1 << 20;

/// One value of the header dict.
struct Literal {
  enum Kind { String, Bool, Tuple } kind = String;
  std::string text;         // String
  bool flag = false;        // Bool
  std::vector<int64_t> ints; // Tuple
};

/// The header dict, e.g. "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }":
///   dict  ::= '{' (entry (',' entry)* ','?)? '}'
///   entry ::= string ':' (string | 'True' | 'False' | tuple)
///   tuple ::= '(' ')' | '(' int ',' (int (',' int)* ','?)? ')'
/// with spaces, tabs and newlines between tokens and nothing but them after
/// the '}'. Strings have no escapes; ints are decimal, with an optional '-'.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : s_(text) {}

  /// The entries in order, or nullopt with `error` set.
  std::optional<std::vector<std::pair<std::string, Literal>>> parse(std::string &error) {
    std::vector<std::pair<std::string, Literal>> entries;
    if (!expect('{')) return fail(error, "expected '{'");
    while (!peek('}')) {
      std::string key;
      if (!string(key)) return fail(error, "expected a quoted key or '}'");
      if (!expect(':')) return fail(error, "expected ':' after the key");
      Literal value;
      if (!literal(value)) return fail(error, why_.empty() ? "expected a string, True, False or a tuple" : why_);
      entries.emplace_back(std::move(key), std::move(value));
      if (!expect(',')) break;
    }
    if (!expect('}')) return fail(error, "expected ',' or '}'");
    skipSpace();
    if (pos_ != s_.size()) return fail(error, "unexpected text after the dict");
    return entries;
  }

private:
  std::nullopt_t fail(std::string &error, const std::string &what) {
    error = fmt::format("{} at byte {} of the header", what, pos_);
    return std::nullopt;
  }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool peek(char c) {
    skipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool expect(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  bool word(std::string_view w) {
    skipSpace();
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  bool string(std::string &out) {
    skipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    char quote = s_[pos_];
    size_t end = pos_ + 1;
    while (end < s_.size() && s_[end] != quote) {
      unsigned char c = static_cast<unsigned char>(s_[end]);
      if (c < 0x20 || c >= 0x7f || c == '\\') return false;
      ++end;
    }
    if (end >= s_.size()) return false;
    out.assign(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return true;
  }
  bool integer(int64_t &out) {
    skipSpace();
    bool negative = pos_ < s_.size() && s_[pos_] == '-';
    size_t p = pos_ + (negative ? 1 : 0);
    if (p >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[p]))) return false;
    int64_t v = 0;
    for (; p < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p])); ++p) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[p] - '0', &v)) {
        why_ = "a dim too large for int64";
        return false;
      }
    }
    if (p < s_.size() && s_[p] == 'L') ++p;  // Python 2's long suffix, in files written by old numpy
    out = negative ? -v : v;
    pos_ = p;
    return true;
  }
  bool tuple(std::vector<int64_t> &out) {
    if (!expect('(')) return false;
    bool comma = false;
    while (!peek(')')) {
      if (out.size() == kMaxDims) {
        why_ = fmt::format("more than {} dims", kMaxDims);
        return false;
      }
      int64_t v = 0;
      if (!integer(v)) return false;
      out.push_back(v);
      comma = expect(',');
      if (!comma) break;
    }
    if (out.size() == 1 && !comma) {
      why_ = "'(n)' is not a tuple; a 1-d shape is written '(n,)'";
      return false;
    }
    return expect(')');
  }
  bool literal(Literal &out) {
    if (peek('\'') || peek('"')) {
      out.kind = Literal::String;
      return string(out.text);
    }
    if (peek('(')) {
      out.kind = Literal::Tuple;
      return tuple(out.ints);
    }
    out.kind = Literal::Bool;
    if (word("True")) {
      out.flag = true;
      return true;
    }
    out.flag = false;
    return word("False");
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string why_;
};

/// The dtype of a descr, or nullopt with `error` set.
std::optional<DType> parseDescr(const std::string &descr, std::string &error) {
  static const std::pair<const char *, DType> kTypes[] = {
      {"f4", DType::F32}, {"f8", DType::F64}, {"i4", DType::I32}, {"i8", DType::I64}};
  if (descr.size() == 3) {
    for (const auto &[code, type] : kTypes) {
      if (descr.compare(1, 2, code) != 0) continue;
      // '=' is native order and '|' "not applicable"; numpy reads both as native, little-endian here.
      if (descr[0] == '<' || descr[0] == '=' || descr[0] == '|') return type;
      if (descr[0] == '>') {
        error = fmt::format("big-endian data ('{}') is not supported; save it little-endian (arr.astype('<{}'))", descr, code);
        return std::nullopt;
      }
    }
  }
  error = fmt::format("unsupported dtype '{}' (rnnc reads '<f4', '<f8', '<i4', '<i8')", descr);
  return std::nullopt;
}

struct Header {
  DType dtype = DType::F64;
  std::vector<int64_t> shape;
};

/// Checks the parsed dict: exactly descr, fortran_order and shape, each once
/// and of the right kind, and a descr and shape rnnc can read.
std::optional<Header> checkHeader(const std::vector<std::pair<std::string, Literal>> &entries, std::string &error) {
  const Literal *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (const auto &[key, value] : entries) {
    const Literal **slot = key == "descr" ? &descr : key == "fortran_order" ? &fortran : key == "shape" ? &shape : nullptr;
    if (!slot) {
      error = fmt::format("header has an unknown key '{}'", key);
      return std::nullopt;
    }
    if (*slot) {
      error = fmt::format("header has the key '{}' twice", key);
      return std::nullopt;
    }
    *slot = &value;
  }
  if (!descr || !fortran || !shape) {
    error = fmt::format("header lacks the key '{}'", !descr ? "descr" : !fortran ? "fortran_order" : "shape");
    return std::nullopt;
  }
  if (descr->kind != Literal::String) {
    error = "header's descr is not a string (structured dtypes are not supported)";
    return std::nullopt;
  }
  if (fortran->kind != Literal::Bool) {
    error = "header's fortran_order is not True or False";
    return std::nullopt;
  }
  if (shape->kind != Literal::Tuple) {
    error = "header's shape is not a tuple";
    return std::nullopt;
  }
  Header h;
  auto dtype = parseDescr(descr->text, error);
  if (!dtype) return std::nullopt;
  h.dtype = *dtype;
  if (fortran->flag) {
    error = "Fortran order is not supported (save a C-order array: np.ascontiguousarray)";
    return std::nullopt;
  }
  h.shape = shape->ints;
  for (int64_t d : h.shape) {
    if (d < 0) {
      error = fmt::format("the header's shape {} has a negative dim", shapeText(h.shape));
      return std::nullopt;
    }
  }
  return h;
}

uint64_t loadLE(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// The shape as Python writes a tuple: "()", "(3,)", "(3, 4)".
std::string pythonShape(const std::vector<int64_t> &shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

}  // namespace

std::optional<Array> readNpy(const std::string &path, std::string &error) {
  auto file = InputFile::open(path, error);
  if (!file) return std::nullopt;
  auto fail = [&](const std::string &what) -> std::optional<Array> {
    error = fmt::format("{}: {}", path, what);
    return std::nullopt;
  };

  unsigned char prefix[12] = {};
  uint64_t have = std::min<uint64_t>(file->size(), sizeof prefix);
  if (!file->read(0, have, reinterpret_cast<char *>(prefix), error)) return std::nullopt;
  if (have < kMagic.size() || std::memcmp(prefix, kMagic.data(), kMagic.size()) != 0)
    return fail("not a .npy file (bad magic; expected \\x93NUMPY)");
  if (have < 8) return fail("truncated header (the file ends inside the version)");
  int major = prefix[6], minor = prefix[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    return fail(fmt::format("unsupported .npy version {}.{} (rnnc reads 1.0, 2.0 and 3.0)", major, minor));
  int lengthBytes = major == 1 ? 2 : 4;
  uint64_t headerStart = 8 + static_cast<uint64_t>(lengthBytes);
  if (have < headerStart) return fail("truncated header (the file ends inside the header length)");
  uint64_t headerLength = loadLE(prefix + 8, lengthBytes);
  if (headerLength > file->size() - headerStart)
    return fail(fmt::format("the header length {} runs past the end of the file ({} bytes)", headerLength, file->size()));
  if (headerLength > kMaxHeaderBytes)
    return fail(fmt::format("the header is {} bytes, more than the limit of {}", headerLength, kMaxHeaderBytes));

  std::string text(headerLength, '\0');
  if (!file->read(headerStart, headerLength, text.data(), error)) return std::nullopt;
  std::string why;
  auto entries = HeaderParser(text).parse(why);
  if (!entries) return fail("malformed header: " + why);
  auto header = checkHeader(*entries, why);
  if (!header) return fail(why);

  int64_t itemSize = dtypeSize(header->dtype);
  auto need = checkedBytes(header->shape, itemSize);
  if (!need)
    return fail(fmt::format("the header's shape {} of {} has more bytes than an int64 holds", shapeText(header->shape),
                            dtypeName(header->dtype)));
  uint64_t dataStart = headerStart + headerLength;
  uint64_t dataBytes = file->size() - dataStart;
  if (dataBytes != static_cast<uint64_t>(*need))
    return fail(fmt::format("data is {} bytes, the header's shape {} of {} needs {}", dataBytes, shapeText(header->shape),
                            dtypeName(header->dtype), *need));

  Array a;
  a.dtype = header->dtype;
  a.shape = header->shape;
  a.data.reserve(static_cast<size_t>(*need / itemSize));
  std::string chunk(std::min<uint64_t>(dataBytes, kChunkBytes), '\0');
  for (uint64_t done = 0; done < dataBytes;) {
    uint64_t n = std::min<uint64_t>(dataBytes - done, kChunkBytes);
    if (!file->read(dataStart + done, n, chunk.data(), error)) return std::nullopt;
    appendDecoded(a.dtype, chunk.data(), static_cast<int64_t>(n) / itemSize, a.data);
    done += n;
  }
  return a;
}

bool writeNpy(const std::string &path, const Array &a, std::string &error) {
  if (!checkWritable(a, error)) {
    error = fmt::format("{}: cannot write: {}", path, error);
    return false;
  }
  static const char *kDescr[] = {"<f4", "<f8", "<i4", "<i8"};
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                 kDescr[static_cast<int>(a.dtype)], pythonShape(a.shape));
  // Version 1.0 unless the header outgrows its 2-byte length; padded with
  // spaces and a final '\n' so the data starts at a multiple of 64.
  auto paddedLength = [&](size_t headerStart) { return dict.size() + 1 + (64 - (headerStart + dict.size() + 1) % 64) % 64; };
  int major = paddedLength(10) <= 0xffff ? 1 : 2;
  size_t headerStart = major == 1 ? 10 : 12;
  size_t headerLength = paddedLength(headerStart);

  std::string out(kMagic);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < headerStart - 8; ++i) out += static_cast<char>((headerLength >> (8 * i)) & 0xff);
  out += dict;
  out.append(headerLength - dict.size() - 1, ' ');
  out += '\n';
  appendValues(a, out);
  return writeFileAtomically(path, out, error);
}

}  // namespace rnnc::io

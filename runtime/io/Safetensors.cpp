// safetensors reading and writing.
//
// Reading, in order, touching nothing the file has not yet earned:
//   1. open: a regular file of at most kMaxFileBytes;
//   2. the header length N: 8 bytes little-endian, N <= 100 MB and within the file;
//   3. the header: JSON starting with '{', parsed with a callback that refuses
//      duplicate keys (nlohmann::json would keep the last one silently);
//   4. each entry: dtype, shape, data_offsets, their sizes overflow-checked;
//   5. the entries sorted by offset tile the data buffer: no overlap, no hole;
//      only then is the data read, tensor by tensor, into doubles.
#include "io/Safetensors.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

namespace rnnc::io {
namespace {

// Ordered: a file's tensors of size zero share offsets, and keep their order
// in the header; the writer keeps the order it is given.
using json = nlohmann::ordered_json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr uint64_t kChunkBytes = 1 << 20;
constexpr const char *kMetadataKey = "__metadata__";

const char *dtypeCode(DType t) {
  switch (t) {
  case DType::F32: return "F32";
  case DType::F64: return "F64";
  case DType::I32: return "I32";
  case DType::I64: return "I64";
  }
  return "?";
}

std::optional<DType> parseDtype(const std::string &code) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64})
    if (code == dtypeCode(t)) return t;
  return std::nullopt;
}

/// One tensor's header entry, checked.
struct Entry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

/// A JSON integer in [0, INT64_MAX].
std::optional<int64_t> nonNegative(const json &v) {
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(u);
  }
  return std::nullopt;
}

/// Checks the entry `name: v` on its own against a data buffer of `dataBytes`.
std::optional<Entry> checkEntry(const std::string &name, const json &v, uint64_t dataBytes, std::string &error) {
  auto fail = [&](const std::string &what) -> std::optional<Entry> {
    error = fmt::format("tensor '{}': {}", name, what);
    return std::nullopt;
  };
  if (!v.is_object()) return fail("entry is not an object");
  for (const auto &item : v.items()) {
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      return fail(fmt::format("unknown key '{}'", item.key()));
  }
  if (!v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
    return fail("entry needs dtype, shape and data_offsets");
  if (!v["dtype"].is_string()) return fail("dtype is not a string");
  Entry e;
  e.name = name;
  auto dtype = parseDtype(v["dtype"].get<std::string>());
  if (!dtype) return fail(fmt::format("dtype {} is not supported (rnnc reads F32, F64, I32, I64)", v["dtype"].get<std::string>()));
  e.dtype = *dtype;

  const json &shape = v["shape"];
  if (!shape.is_array()) return fail("shape is not an array");
  for (const json &d : shape) {
    auto dim = nonNegative(d);
    if (!dim) return fail(fmt::format("shape {} has a dim that is not a non-negative integer", shape.dump()));
    e.shape.push_back(*dim);
  }
  const json &offsets = v["data_offsets"];
  std::optional<int64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = nonNegative(offsets[0]);
    end = nonNegative(offsets[1]);
  }
  if (!begin || !end) return fail(fmt::format("data_offsets {} is not [begin, end] of non-negative integers", offsets.dump()));
  e.begin = static_cast<uint64_t>(*begin);
  e.end = static_cast<uint64_t>(*end);
  if (e.begin > e.end) return fail(fmt::format("data_offsets [{}, {}] end before they begin", e.begin, e.end));
  if (e.end > dataBytes)
    return fail(fmt::format("data_offsets [{}, {}] run past the data, which is {} bytes", e.begin, e.end, dataBytes));
  auto need = checkedBytes(e.shape, dtypeSize(e.dtype));
  if (!need) return fail(fmt::format("shape {} of {} has more bytes than an int64 holds", shapeText(e.shape), dtypeCode(e.dtype)));
  if (e.end - e.begin != static_cast<uint64_t>(*need))
    return fail(fmt::format("data_offsets [{}, {}] hold {} bytes, shape {} of {} needs {}", e.begin, e.end, e.end - e.begin,
                            shapeText(e.shape), dtypeCode(e.dtype), *need));
  return e;
}

/// Parses the header text, refusing duplicate keys at any depth.
std::optional<json> parseHeader(const std::string &text, std::string &error) {
  if (text.empty() || text[0] != '{') {
    error = "header does not start with '{'";
    return std::nullopt;
  }
  // JSON allows no raw control character, but nlohmann stops at a NUL.
  if (text.find('\0') != std::string::npos) {
    error = "header is not valid JSON: it contains a NUL byte";
    return std::nullopt;
  }
  std::vector<std::set<std::string>> keys;  // one set per open object
  std::string duplicate;
  auto noteKeys = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, noteKeys);
  } catch (const json::exception &e) {
    error = fmt::format("header is not valid JSON: {}", e.what());
    return std::nullopt;
  }
  if (!duplicate.empty()) {
    error = fmt::format("header has the key '{}' twice", duplicate);
    return std::nullopt;
  }
  if (!header.is_object()) {
    error = "header is not a JSON object";
    return std::nullopt;
  }
  return header;
}

bool checkMetadata(const json &metadata, std::string &error) {
  bool ok = metadata.is_object();
  for (const auto &item : metadata.items()) ok = ok && item.value().is_string();
  if (!ok) error = fmt::format("{} is not a map of strings to strings", kMetadataKey);
  return ok;
}

/// Sorts `entries` by offset (ties keep header order) and checks that they tile [0, dataBytes).
bool checkTiling(std::vector<Entry> &entries, uint64_t dataBytes, std::string &error) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry &a, const Entry &b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  uint64_t covered = 0;
  const Entry *previous = nullptr;
  for (const Entry &e : entries) {
    if (e.begin < covered) {
      error = fmt::format("tensor '{}' (bytes [{}, {}]) overlaps tensor '{}' (bytes [{}, {}])", e.name, e.begin, e.end,
                          previous->name, previous->begin, previous->end);
      return false;
    }
    if (e.begin > covered) {
      error = fmt::format("bytes [{}, {}] of the data belong to no tensor", covered, e.begin);
      return false;
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != dataBytes) {
    error = fmt::format("bytes [{}, {}] of the data belong to no tensor", covered, dataBytes);
    return false;
  }
  return true;
}

}  // namespace

std::optional<std::vector<Tensor>> readSafetensors(const std::string &path, std::string &error,
                                                   std::map<std::string, std::string> *metadata) {
  auto file = InputFile::open(path, error);
  if (!file) return std::nullopt;
  auto fail = [&](const std::string &what) -> std::optional<std::vector<Tensor>> {
    error = fmt::format("{}: {}", path, what);
    return std::nullopt;
  };
  if (file->size() < 8) return fail(fmt::format("file is {} bytes, too short for the 8-byte header length", file->size()));
  unsigned char lengthBytes[8];
  if (!file->read(0, 8, reinterpret_cast<char *>(lengthBytes), error)) return std::nullopt;
  uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i) headerLength = (headerLength << 8) | lengthBytes[i];
  if (headerLength > file->size() - 8)
    return fail(fmt::format("the header length {} runs past the end of the file ({} bytes)", headerLength, file->size()));
  if (headerLength > kMaxHeaderBytes)
    return fail(fmt::format("the header is {} bytes, more than the limit of {}", headerLength, kMaxHeaderBytes));

  std::string text(headerLength, '\0');
  if (!file->read(8, headerLength, text.data(), error)) return std::nullopt;
  std::string why;
  auto header = parseHeader(text, why);
  if (!header) return fail(why);

  uint64_t dataStart = 8 + headerLength;
  uint64_t dataBytes = file->size() - dataStart;
  std::vector<Entry> entries;
  for (const auto &item : header->items()) {
    if (item.key() == kMetadataKey) {
      if (!checkMetadata(item.value(), why)) return fail(why);
      if (metadata) {
        metadata->clear();
        for (const auto &m : item.value().items()) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto entry = checkEntry(item.key(), item.value(), dataBytes, why);
    if (!entry) return fail(why);
    entries.push_back(std::move(*entry));
  }
  if (!checkTiling(entries, dataBytes, why)) return fail(why);

  std::vector<Tensor> tensors;
  tensors.reserve(entries.size());
  std::string chunk(std::min<uint64_t>(dataBytes, kChunkBytes), '\0');
  for (const Entry &e : entries) {
    Tensor t;
    t.name = e.name;
    t.array.dtype = e.dtype;
    t.array.shape = e.shape;
    int64_t itemSize = dtypeSize(e.dtype);
    t.array.data.reserve(static_cast<size_t>((e.end - e.begin) / itemSize));
    for (uint64_t at = e.begin; at < e.end;) {
      uint64_t n = std::min<uint64_t>(e.end - at, kChunkBytes);
      if (!file->read(dataStart + at, n, chunk.data(), error)) return std::nullopt;
      appendDecoded(e.dtype, chunk.data(), static_cast<int64_t>(n) / itemSize, t.array.data);
      at += n;
    }
    tensors.push_back(std::move(t));
  }
  return tensors;
}

bool writeSafetensors(const std::string &path, const std::vector<Tensor> &tensors, std::string &error,
                      const std::map<std::string, std::string> &metadata) {
  auto fail = [&](const std::string &what) {
    error = fmt::format("{}: cannot write: {}", path, what);
    return false;
  };
  json header = json::object();
  if (!metadata.empty()) {
    json map = json::object();
    for (const auto &[key, value] : metadata) map[key] = value;
    header[kMetadataKey] = std::move(map);
  }
  std::string data;
  std::set<std::string> names;
  for (const Tensor &t : tensors) {
    if (t.name.empty()) return fail("a tensor has an empty name");
    if (t.name == kMetadataKey) return fail(fmt::format("'{}' is not a tensor name", kMetadataKey));
    if (!names.insert(t.name).second) return fail(fmt::format("two tensors are named '{}'", t.name));
    std::string why;
    if (!checkWritable(t.array, why)) return fail(fmt::format("tensor '{}': {}", t.name, why));
    uint64_t begin = data.size();
    appendValues(t.array, data);
    header[t.name] = {{"dtype", dtypeCode(t.array.dtype)}, {"shape", t.array.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception &e) {
    return fail(fmt::format("a tensor name or metadata string is not valid UTF-8 ({})", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  out.reserve(8 + text.size() + data.size());
  for (int i = 0; i < 8; ++i) out += static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xff);
  out += text;
  out += data;
  return writeFileAtomically(path, out, error);
}

std::optional<std::string> describeTruncation(const std::string &path) {
  std::string error;
  auto file = InputFile::open(path, error);
  if (!file) return std::nullopt;
  if (file->size() < 8) return fmt::format("the file is {} bytes, shorter than the 8-byte header length", file->size());
  unsigned char lengthBytes[8];
  if (!file->read(0, 8, reinterpret_cast<char *>(lengthBytes), error)) return std::nullopt;
  uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i) headerLength = (headerLength << 8) | lengthBytes[i];
  if (headerLength > kMaxHeaderBytes) return std::nullopt;  // not a length: corrupt, not cut short
  if (headerLength > file->size() - 8)
    return fmt::format("the header is {} bytes, the file ends {} bytes into it", headerLength, file->size() - 8);
  std::string text(headerLength, '\0');
  if (!file->read(8, headerLength, text.data(), error)) return std::nullopt;
  std::string why;
  auto header = parseHeader(text, why);
  if (!header) return std::nullopt;
  uint64_t end = 0;
  for (const auto &item : header->items()) {
    const json &offsets = item.value().is_object() && item.value().contains("data_offsets") ? item.value()["data_offsets"] : json();
    if (offsets.is_array() && offsets.size() == 2) {
      if (auto e = nonNegative(offsets[1])) end = std::max(end, static_cast<uint64_t>(*e));
    }
  }
  uint64_t promised = 8 + headerLength + end;
  if (end > std::numeric_limits<uint64_t>::max() - 8 - headerLength || promised > file->size())
    return fmt::format("the header promises {} bytes, the file has {}", promised, file->size());
  return std::nullopt;
}

}  // namespace rnnc::io

// Checkpoints as safetensors (checkpoint.h).
//
// Saving: the tensors in a fixed order (params in table order, then each
// optimizer slot per param, then the carried states), the metadata, and a
// checksum: FNV-1a 64 over every metadata entry but "checksum" (key, value,
// in key order) and every tensor (name, then its float32 bytes, in file order).
//
// Loading, each step refusing with its own message:
//   1. read the safetensors file (a truncated one is told apart);
//   2. format and version; 3. the checksum (corrupt);
//   4. model name and source hash, task, optimizer, batch;
//   5. every expected tensor present, float32, of its shape; none left over.
#include "rnnc/checkpoint.h"

#include "io/Safetensors.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <type_traits>

namespace rnnc::rt {
namespace {

using Metadata = std::map<std::string, std::string>;

/// A tensor of the checkpoint: its name, shape and where its values live in a
/// Checkpoint (`Real` is float when loading into it, const float when saving).
template <typename Real> struct Layout {
  std::string name;
  std::vector<int64_t> shape;
  Real *values;
};

/// The tensors a checkpoint of `m` holds for `c`, in file order.
template <typename C, typename Real = std::conditional_t<std::is_const_v<C>, const float, float>>
std::vector<Layout<Real>> layout(const rnnc_model &m, C &c) {
  std::vector<Layout<Real>> out;
  auto paramShape = [](const rnnc_tensor &p) {
    return std::vector<int64_t>(p.shape, p.shape + p.rank);
  };
  for (int k = 0; k < m.n_params; ++k)
    out.push_back({m.params[k].name, paramShape(m.params[k]), c.params.data() + m.params[k].offset});
  for (auto &slot : c.slots) {
    for (int k = 0; k < m.n_params; ++k)
      out.push_back({fmt::format("{}.{}/{}", c.optimizer, slot.name, m.params[k].name), paramShape(m.params[k]),
                     slot.values.data() + m.params[k].offset});
  }
  for (size_t k = 0; k < c.carry.size(); ++k) {
    const rnnc_tensor &s = m.states[k];
    out.push_back({fmt::format("carry/{}", s.name), {s.depth, c.batch, s.shape[0]}, c.carry[k].data()});
  }
  return out;
}

/// Checks that every param, slot and carry array of `c` is as long as `m` needs.
bool checkSizes(const rnnc_model &m, const Checkpoint &c, std::string &error) {
  auto fits = [&](const std::vector<float> &v) { return static_cast<int64_t>(v.size()) == m.param_elements; };
  bool ok = fits(c.params);
  for (const OptimizerSlot &s : c.slots) ok = ok && fits(s.values);
  ok = ok && (c.carry.empty() || static_cast<int32_t>(c.carry.size()) == m.n_states);
  for (size_t k = 0; ok && k < c.carry.size(); ++k)
    ok = static_cast<int64_t>(c.carry[k].size()) == m.states[k].depth * c.batch * m.states[k].shape[0];
  if (!ok) error = "internal error: checkpoint arrays do not match the model's sizes";
  return ok;
}

}  // namespace

uint64_t checkpointChecksum(const Metadata &meta, const std::vector<io::Tensor> &tensors) {
  uint64_t h = fnv1a("", 0);
  for (const auto &[key, value] : meta) {
    if (key == "checksum") continue;
    h = fnv1a(key.c_str(), key.size() + 1, h);
    h = fnv1a(value.c_str(), value.size() + 1, h);
  }
  for (const io::Tensor &t : tensors) {
    h = fnv1a(t.name.c_str(), t.name.size() + 1, h);
    for (double v : t.array.data) {
      const float f = static_cast<float>(v);
      h = fnv1a(&f, sizeof f, h);
    }
  }
  return h;
}

namespace {

bool parseInt(const Metadata &meta, const std::string &key, int64_t &out, std::string &why) {
  auto it = meta.find(key);
  if (it == meta.end()) {
    why = fmt::format("its metadata has no '{}'", key);
    return false;
  }
  const std::string &s = it->second;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
    why = fmt::format("its metadata '{}' is not an integer: '{}'", key, s);
    return false;
  }
  return true;
}

std::string get(const Metadata &meta, const std::string &key) {
  auto it = meta.find(key);
  return it == meta.end() ? std::string() : it->second;
}

/// Step 4: the checkpoint belongs to this model, task, optimizer and batch.
bool checkIdentity(const Metadata &meta, const rnnc_model &m, const Checkpoint &c, std::string &why) {
  auto differs = [&](const char *key, const std::string &what, const std::string &expected) {
    const std::string found = get(meta, key);
    if (found == expected) return false;
    why = fmt::format("it is for {} '{}', this run has {} '{}'", what, found, what, expected);
    return true;
  };
  if (differs("model", "model", m.name)) return false;
  if (differs("source_hash", "source hash", m.source_hash)) {
    why += " (the model was compiled from other source)";
    return false;
  }
  if (differs("task", "task", c.task) || differs("optimizer", "optimizer", c.optimizer)) return false;
  int64_t batch = 0;
  if (!parseInt(meta, "batch", batch, why)) return false;
  if (batch != c.batch) {
    why = fmt::format("it was trained with batch {}, this run has batch {}", batch, c.batch);
    return false;
  }
  return true;
}

/// Step 5: every expected tensor, float32 and of its shape, copied into `c`; nothing else.
bool fillTensors(const std::vector<io::Tensor> &tensors, const std::vector<Layout<float>> &expected, std::string &why) {
  std::map<std::string, const io::Tensor *> byName;
  for (const io::Tensor &t : tensors) byName[t.name] = &t;
  for (const Layout<float> &l : expected) {
    auto it = byName.find(l.name);
    if (it == byName.end()) {
      why = fmt::format("it has no tensor '{}'", l.name);
      return false;
    }
    const io::Array &a = it->second->array;
    if (a.dtype != io::DType::F32 || a.shape != l.shape) {
      why = fmt::format("tensor '{}' is {} {}, expected float32 {}", l.name, io::dtypeName(a.dtype),
                        io::shapeText(a.shape), io::shapeText(l.shape));
      return false;
    }
    for (size_t i = 0; i < a.data.size(); ++i) l.values[i] = static_cast<float>(a.data[i]);
    byName.erase(it);
  }
  if (!byName.empty()) {
    why = fmt::format("it has a tensor '{}' this run does not expect", byName.begin()->first);
    return false;
  }
  return true;
}

}  // namespace

uint64_t fnv1a(const void *bytes, size_t n, uint64_t hash) {
  const auto *p = static_cast<const unsigned char *>(bytes);
  for (size_t i = 0; i < n; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

bool saveCheckpoint(const std::string &path, const rnnc_model &m, const Checkpoint &c, std::string &error) {
  if (!checkSizes(m, c, error)) return false;
  std::vector<io::Tensor> tensors;
  for (const Layout<const float> &l : layout(m, c)) {
    io::Tensor t;
    t.name = l.name;
    t.array.dtype = io::DType::F32;
    t.array.shape = l.shape;
    t.array.data.assign(l.values, l.values + t.array.elements());
    tensors.push_back(std::move(t));
  }
  Metadata meta = {{"format", kCheckpointFormat},
                   {"format_version", kCheckpointVersion},
                   {"model", m.name},
                   {"source_hash", m.source_hash},
                   {"task", c.task},
                   {"optimizer", c.optimizer},
                   {"step", std::to_string(c.step)},
                   {"batch", std::to_string(c.batch)},
                   {"rng", c.rng},
                   {"data_position", std::to_string(c.position)},
                   {"skipped", std::to_string(c.skipped)}};
  if (c.loss_scale > 0) {
    meta["loss_scale"] = fmt::format("{:.17g}", c.loss_scale);
    meta["loss_scale_good_steps"] = std::to_string(c.scale_good_steps);
    meta["loss_scale_skips"] = std::to_string(c.scale_skips);
  }
  meta["checksum"] = fmt::format("{:016x}", checkpointChecksum(meta, tensors));
  return io::writeSafetensors(path, tensors, error, meta);
}

bool loadCheckpoint(const std::string &path, const rnnc_model &m, Checkpoint &c, std::string &error) {
  if (!checkSizes(m, c, error)) return false;
  std::string why;
  auto fail = [&](const std::string &what) {
    error = fmt::format("{}: {}", path, what);
    return false;
  };
  Metadata meta;
  auto tensors = io::readSafetensors(path, error, &meta);
  if (!tensors) {
    if (auto cut = io::describeTruncation(path)) return fail(fmt::format("the checkpoint is truncated: {}", *cut));
    if (error.rfind(path + ": ", 0) == 0) error = error.substr(path.size() + 2);
    return fail(fmt::format("not a readable checkpoint: {}", error));
  }
  if (get(meta, "format") != kCheckpointFormat)
    return fail(fmt::format("not an rnnc checkpoint (its metadata has no format \"{}\")", kCheckpointFormat));
  if (get(meta, "format_version") != kCheckpointVersion)
    return fail(fmt::format("checkpoint format version '{}', this rnnc reads version {}", get(meta, "format_version"),
                            kCheckpointVersion));
  const std::string sum = fmt::format("{:016x}", checkpointChecksum(meta, *tensors));
  if (get(meta, "checksum") != sum)
    return fail(fmt::format("the checkpoint is corrupt: checksum {} does not match its content ({})",
                            get(meta, "checksum"), sum));
  if (!checkIdentity(meta, m, c, why)) return fail(why);
  if (!parseInt(meta, "step", c.step, why) || !parseInt(meta, "data_position", c.position, why)) return fail(why);
  if (c.step < 0) return fail(fmt::format("its step {} is negative", c.step));
  c.skipped = 0;  // "skipped" came after format version 1's first files: absent means none
  if (meta.count("skipped") && !parseInt(meta, "skipped", c.skipped, why)) return fail(why);
  if (c.skipped < 0 || c.skipped > c.step)
    return fail(fmt::format("its count of skipped steps {} is not within its {} steps", c.skipped, c.step));
  c.loss_scale = 0; // written by runs with dynamic loss scaling only
  c.scale_good_steps = c.scale_skips = 0;
  if (meta.count("loss_scale")) {
    const std::string &text = meta.at("loss_scale");
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), c.loss_scale);
    if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(c.loss_scale) || !(c.loss_scale > 0))
      return fail(fmt::format("its metadata 'loss_scale' is not a positive number: '{}'", text));
    if (!parseInt(meta, "loss_scale_good_steps", c.scale_good_steps, why) ||
        !parseInt(meta, "loss_scale_skips", c.scale_skips, why))
      return fail(why);
    if (c.scale_good_steps < 0 || c.scale_good_steps > c.step || c.scale_skips < 0 || c.scale_skips > c.step)
      return fail(fmt::format("its loss scaling counts ({} good steps, {} skipped) are not within its {} steps",
                              c.scale_good_steps, c.scale_skips, c.step));
  }
  c.rng = get(meta, "rng");
  if (!fillTensors(*tensors, layout(m, c), why)) return fail(why);
  return true;
}

}  // namespace rnnc::rt

// The textual IR's statements as written, one per line, before any id or name
// is resolved, each part with where it was so that a later problem is reported
// at its line and column. parseGraphText checks the syntax only (Reader.cpp
// gives the statements their meaning); the grammar is in docs/rnnc-opt.md.
#pragma once

#include "ir/Graph.h"
#include "support/Diagnostics.h"

#include <string>
#include <vector>

namespace rnnc {

/// Limits on what a graph's text may ask for. Widths and shapes are bounded as
/// the frontend bounds sizes (Sema's kMaxSize); the rest keep the memory a
/// hostile file can make the reader use proportional to its size.
struct ReadLimits {
  static constexpr int64_t kMaxWidth = (int64_t{1} << 31) - 1; // a width or a param's dim
  static constexpr int32_t kMaxDelay = 1 << 24;                // |k| in `%3[t-k]`
  static constexpr uint32_t kMaxNodeId = 1 << 22;              // and at most 16 ids per byte of the file
  static constexpr uint32_t kNodeIdsPerByte = 16;
  static constexpr uint32_t kMaxSourceLines = 1 << 24; // of `@file:line`, all files together
};

struct WrittenName {
  std::string name;
  SourceRange where;
};

struct WrittenEdge {
  NodeId id = kNoNode;
  int32_t delay = 0;
  SourceRange where; // `%3[t-1]`
};

struct WrittenLoc {
  std::string file; // as the note spells it, quotes taken off
  uint32_t line = 0;
  SourceRange where;
};

/// `param W: [8, 4] stacked with U, V`
struct WrittenParam {
  WrittenName name;
  std::vector<int64_t> shape;
  std::vector<WrittenName> stackedWith; // after the param itself
  // `dropout of W keep 0.75 at 3`: a dropped param (DropConnect)
  bool dropped = false;
  WrittenName of;
  double keep = 1;
  int64_t site = 0;
  SourceRange keepWhere;
};

/// `%5 = matmul W_hh, %22[t-1] : [512] bwd  # name @lstm.rnn:9`
struct WrittenNode {
  NodeId id = kNoNode;
  SourceRange where; // `%5`
  Op op = Op::Const;
  std::vector<WrittenName> names; // the params it reads, or an input's port name
  double value = 0;               // const
  bool hasValue = false;
  std::vector<WrittenEdge> inputs;
  bool hasRange = false; // slice `[first:end]`, pad `at offset`
  int64_t first = 0, end = 0;
  SourceRange rangeWhere;
  int64_t width = 0;
  bool isIndex = false;
  SourceRange typeWhere;
  bool backward = false;
  bool perSequence = false; // keep `per sequence`
  bool inverted = false;    // keep `inverted`
  bool weighted = false;    // active `weighted`
  std::string name; // the user's name, from the note
  std::vector<WrittenLoc> locs;
};

enum class PortKind : uint8_t { Output, Loss, Seed, ParamGrad, InputGrad, StateGrad };

/// `output h = %22`, `loss = %9`, `grad param W = %46`, ...
struct WrittenPort {
  PortKind kind = PortKind::Output;
  WrittenName name; // empty for the loss
  WrittenEdge value;
};

struct GraphText {
  WrittenName graph;
  NodeId next = 0; // `next %85`: ids end there (0: after the largest written)
  SourceRange nextWhere;
  std::vector<WrittenParam> params;
  std::vector<WrittenNode> nodes;
  std::vector<WrittenPort> ports;
};

/// The statements of `file`. False after reporting syntax errors (one per bad
/// line; past the error limit the engine throws TooManyErrors).
bool parseGraphText(const SourceManager &sm, uint32_t file, DiagnosticEngine &diags, GraphText &out);

} // namespace rnnc

// The statements of a graph's text, line by line: a recursive descent over
// one line at a time, each function quoting its rule. A syntax error ends its
// line (the next line is a fresh statement), so one run reports each bad line.
#include "ir/ReaderSyntax.h"

#include <cctype>
#include <charconv>
#include <fmt/format.h>
#include <optional>

namespace rnnc {

namespace {

bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isNameChar(char c) { return isNameStart(c) || (c >= '0' && c <= '9') || c == '.'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isPlainFileChar(char c) { return isNameChar(c) || c == '+' || c == '-'; }

struct SyntaxError {
  SourceRange where;
  std::string message;
};

std::optional<Op> opFromMnemonic(std::string_view word) {
#define RNNC_OP(name, mnemonic, kind, rule)                                                                                  \
  if (word == mnemonic) return Op::name;
#include "ir/Ops.def"
  return std::nullopt;
}

std::vector<std::string> allMnemonics() {
  return {
#define RNNC_OP(name, mnemonic, kind, rule) mnemonic,
#include "ir/Ops.def"
  };
}

/// One line of the text (without its line break). Positions are byte offsets
/// into the whole file, so every range it makes points into the file.
class LineParser {
public:
  LineParser(std::string_view text, uint32_t file, uint32_t begin, uint32_t end, uint32_t maxNodeId)
      : text_(text), file_(file), pos_(begin), end_(end), maxNodeId_(maxNodeId) {}

  /// True at the end of the line or at a `//` comment (after spaces).
  bool atEnd() {
    skipSpaces();
    return pos_ == end_ || (pos_ + 1 < end_ && text_[pos_] == '/' && text_[pos_ + 1] == '/');
  }
  char peek() {
    skipSpaces();
    return pos_ < end_ ? text_[pos_] : '\n';
  }
  bool atWord(std::string_view word) {
    skipSpaces();
    size_t n = word.size();
    return pos_ + n <= end_ && text_.substr(pos_, n) == word && (pos_ + n == end_ || !isNameChar(text_[pos_ + n]));
  }
  bool acceptWord(std::string_view word) {
    if (!atWord(word)) return false;
    pos_ += static_cast<uint32_t>(word.size());
    return true;
  }
  bool accept(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const char *context) {
    if (!accept(c)) fail(fmt::format("expected '{}' {}", c, context));
  }
  void expectWord(std::string_view word, const char *context) {
    if (!acceptWord(word)) fail(fmt::format("expected '{}' {}", word, context));
  }
  void expectEnd(const char *what) {
    if (!atEnd()) fail(fmt::format("unexpected {} after {}", shown(), what));
  }
  [[noreturn]] void fail(std::string message) { failAt(here(), std::move(message)); }
  [[noreturn]] void failAt(SourceRange where, std::string message) { throw SyntaxError{where, std::move(message)}; }

  SourceLoc loc() const { return {file_, pos_}; }
  /// Where the next token begins.
  SourceLoc mark() {
    skipSpaces();
    return loc();
  }
  SourceRange from(SourceLoc begin) const { return {begin, loc()}; }

  /// name ::= [A-Za-z_] [A-Za-z0-9_.]*
  WrittenName name(const char *what) {
    skipSpaces();
    SourceLoc begin = loc();
    if (pos_ >= end_ || !isNameStart(text_[pos_])) fail(fmt::format("expected {}, found {}", what, shown()));
    while (pos_ < end_ && isNameChar(text_[pos_])) ++pos_;
    return {std::string(text_.substr(begin.offset, pos_ - begin.offset)), from(begin)};
  }

  /// A decimal integer in [lo, hi].
  int64_t integer(int64_t lo, int64_t hi, const char *what) {
    skipSpaces();
    SourceLoc begin = loc();
    if (pos_ >= end_ || !isDigit(text_[pos_])) fail(fmt::format("expected {}, found {}", what, shown()));
    uint64_t v = 0;
    bool over = false;
    for (; pos_ < end_ && isDigit(text_[pos_]); ++pos_) {
      over |= v > (UINT64_MAX - 9) / 10;
      if (!over) v = v * 10 + static_cast<uint64_t>(text_[pos_] - '0');
    }
    if (pos_ < end_ && isNameChar(text_[pos_])) {
      while (pos_ < end_ && isNameChar(text_[pos_])) ++pos_;
      failAt(from(begin),
             fmt::format("expected {}, found {}", what, quoted(text_.substr(begin.offset, pos_ - begin.offset))));
    }
    std::string spelled(text_.substr(begin.offset, pos_ - begin.offset));
    if (over || v > static_cast<uint64_t>(hi))
      failAt(from(begin), fmt::format("{} {} is too large (the limit is {})", what, spelled, hi));
    if (static_cast<int64_t>(v) < lo) failAt(from(begin), fmt::format("{} {} is below {}", what, spelled, lo));
    return static_cast<int64_t>(v);
  }

  /// number ::= what `{}` formats a double as: `6`, `-0.5`, `1e-05`, `inf`, `nan`
  double number() {
    skipSpaces();
    SourceLoc begin = loc();
    if (pos_ < end_ && text_[pos_] == '-') ++pos_;
    while (pos_ < end_ && (isNameChar(text_[pos_]) || text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    std::string_view spelled = text_.substr(begin.offset, pos_ - begin.offset);
    double v = 0;
    auto [rest, ec] = std::from_chars(spelled.data(), spelled.data() + spelled.size(), v);
    if (spelled.empty() || ec != std::errc() || rest != spelled.data() + spelled.size())
      failAt(from(begin), fmt::format("expected a number, found {}", spelled.empty() ? shown() : quoted(spelled)));
    return v;
  }

  /// id ::= '%' integer
  NodeId nodeId() {
    skipSpaces();
    if (pos_ >= end_ || text_[pos_] != '%') fail(fmt::format("expected a node (%N), found {}", shown()));
    ++pos_;
    if (pos_ >= end_ || !isDigit(text_[pos_])) fail(fmt::format("expected a node number after '%', found {}", shown()));
    return static_cast<NodeId>(integer(0, maxNodeId_, "node id"));
  }

  /// edge ::= id [ '[' 't' ('-' | '+') integer ']' ]
  WrittenEdge edge() {
    skipSpaces();
    SourceLoc begin = loc();
    WrittenEdge e;
    e.id = nodeId();
    if (peek() == '[' && nextNonSpaceAfterBracketIsT()) {
      accept('[');
      expectWord("t", "in a delay");
      int sign = accept('-') ? 1 : accept('+') ? -1 : 0;
      if (!sign) fail(fmt::format("expected '-' or '+' after 't' in a delay, found {}", shown()));
      e.delay = static_cast<int32_t>(sign * integer(0, ReadLimits::kMaxDelay, "delay"));
      expect(']', "to close the delay");
    }
    e.where = from(begin);
    return e;
  }

  /// file ::= [A-Za-z0-9_.+-]+ | '"' (char | '\' escape)* '"'
  std::string fileName() {
    skipSpaces();
    std::string out;
    if (pos_ < end_ && text_[pos_] == '"') {
      ++pos_;
      for (;;) {
        if (pos_ >= end_) fail("the file name's closing '\"' is missing");
        char c = text_[pos_++];
        if (c == '"') break;
        if (c != '\\') {
          out += c;
          continue;
        }
        if (pos_ >= end_) fail("the file name's closing '\"' is missing");
        char e = text_[pos_++];
        if (e == '"' || e == '\\') {
          out += e;
        } else if (e == 'x' && pos_ + 2 <= end_ && isxdigit(static_cast<unsigned char>(text_[pos_])) &&
                   isxdigit(static_cast<unsigned char>(text_[pos_ + 1]))) {
          out += static_cast<char>(std::stoi(std::string(text_.substr(pos_, 2)), nullptr, 16));
          pos_ += 2;
        } else {
          failAt({SourceLoc{file_, pos_ - 2}, loc()}, "unknown escape in a file name (\\\", \\\\ and \\xNN are known)");
        }
      }
      if (out.empty()) fail("a file name is not empty");
      return out;
    }
    SourceLoc begin = loc();
    while (pos_ < end_ && isPlainFileChar(text_[pos_])) ++pos_;
    if (pos_ == begin.offset) fail(fmt::format("expected a file name after '@', found {}", shown()));
    return std::string(text_.substr(begin.offset, pos_ - begin.offset));
  }

  /// What is at the current position, for a message: `'x'`, `end of line`.
  std::string shown() {
    skipSpaces();
    if (pos_ >= end_) return "end of line";
    size_t n = 0;
    while (pos_ + n < end_ && n < 16 && isNameChar(text_[pos_ + n])) ++n;
    if (n == 0) return fmt::format("'{}'", describeByte(static_cast<unsigned char>(text_[pos_])));
    return quoted(text_.substr(pos_, n));
  }

private:
  void skipSpaces() {
    while (pos_ < end_ && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  SourceRange here() {
    skipSpaces();
    return {loc(), SourceLoc{file_, pos_ < end_ ? pos_ + 1 : pos_}};
  }
  bool nextNonSpaceAfterBracketIsT() {
    uint32_t p = pos_ + 1;
    while (p < end_ && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    return p < end_ && text_[p] == 't' && (p + 1 == end_ || !isNameChar(text_[p + 1]));
  }
  static std::string quoted(std::string_view s) {
    std::string out;
    for (char c : s) out += describeByte(static_cast<unsigned char>(c));
    return "'" + out + "'";
  }

  std::string_view text_;
  uint32_t file_;
  uint32_t pos_, end_;
  uint32_t maxNodeId_;
};

/// The widest a node of this op may be: an accumulation holds a whole param.
int64_t maxWidthOf(Op op) {
  return opKind(op) == OpKind::Accumulate ? ReadLimits::kMaxWidth * ReadLimits::kMaxWidth : ReadLimits::kMaxWidth;
}

/// param ::= 'param' name ':' '[' dim (',' dim)* ']'
///           [ 'stacked' 'with' name (',' name)* | 'dropout' 'of' name 'keep' number 'at' site ]
WrittenParam parseParam(LineParser &p) {
  WrittenParam w;
  w.name = p.name("a param's name");
  p.expect(':', "after the param's name");
  SourceLoc begin = p.mark();
  p.expect('[', "to begin the param's shape");
  do w.shape.push_back(p.integer(1, ReadLimits::kMaxWidth, "a dim"));
  while (w.shape.size() < 3 && p.accept(','));
  p.expect(']', "to close the param's shape");
  if (w.shape.size() > 2) p.failAt(p.from(begin), "a param is a vector [n] or a matrix [rows, cols]");
  if (p.acceptWord("stacked")) {
    p.expectWord("with", "after 'stacked'");
    do w.stackedWith.push_back(p.name("a param's name"));
    while (p.accept(','));
  } else if (p.acceptWord("dropout")) {
    p.expectWord("of", "after 'dropout' (dropout of W keep 0.75 at 1)");
    w.dropped = true;
    w.of = p.name("the dropped param's name");
    p.expectWord("keep", "after the dropped param (dropout of W keep 0.75 at 1)");
    SourceLoc begin = p.mark();
    w.keep = p.number();
    w.keepWhere = p.from(begin);
    p.expectWord("at", "after the probability it keeps (dropout of W keep 0.75 at 1)");
    w.site = p.integer(0, 0xffffffffll, "a mask's site");
  }
  p.expectEnd("the param");
  return w;
}

/// operands ::= operand (',' operand)*      operand ::= name | number | edge
/// range ::= '[' first ':' end ']' (slice, right after its operand) | 'at' offset (pad)
void parseOperands(LineParser &p, WrittenNode &n) {
  if (n.op == Op::Keep) { // keep probability 'at' site ['inverted'] ['per' 'sequence']
    n.value = p.number();
    n.hasValue = true;
    SourceLoc begin = p.mark();
    p.expectWord("at", "after a mask's probability (keep 0.9 at 1)");
    n.first = p.integer(0, 0xffffffffll, "a mask's site");
    n.rangeWhere = p.from(begin);
    n.hasRange = true;
    n.inverted = p.acceptWord("inverted");
    if (p.acceptWord("per")) {
      p.expectWord("sequence", "after 'per' (keep 0.9 at 1 per sequence)");
      n.perSequence = true;
    }
    return;
  }
  if (n.op == Op::Active) { // active ['weighted']
    n.weighted = p.acceptWord("weighted");
    return;
  }
  if (p.peek() == ':' || (n.op == Op::Pad && p.atWord("at"))) return;
  do {
    if (p.peek() == '%') {
      n.inputs.push_back(p.edge());
      if (p.peek() == '[') {
        SourceLoc begin = p.mark();
        p.accept('[');
        n.first = p.integer(0, ReadLimits::kMaxWidth, "a slice's first element");
        p.expect(':', "between a slice's first and end");
        n.end = p.integer(0, ReadLimits::kMaxWidth, "a slice's end");
        p.expect(']', "to close the slice");
        n.rangeWhere = p.from(begin);
        if (n.op != Op::Slice) p.failAt(n.rangeWhere, "only a slice takes a range [first:end]");
        if (n.hasRange) p.failAt(n.rangeWhere, "a slice takes one range");
        n.hasRange = true;
      }
    } else if (n.op == Op::Const) {
      if (n.hasValue) p.fail("a const takes one number");
      n.value = p.number();
      n.hasValue = true;
    } else {
      n.names.push_back(p.name("a name, a number or a node (%N)"));
    }
  } while (p.accept(','));
  if (n.op == Op::Pad) {
    SourceLoc begin = p.mark();
    p.expectWord("at", "after a pad's operand (pad %3 at 4)");
    n.first = p.integer(0, ReadLimits::kMaxWidth, "a pad's offset");
    n.rangeWhere = p.from(begin);
    n.hasRange = true;
  }
}

/// note ::= '#' [name] ('@' file ':' line (',' line)*)*
void parseNote(LineParser &p, WrittenNode &n) {
  if (!p.accept('#')) return;
  if (p.peek() != '@' && !p.atEnd()) n.name = p.name("a name or '@file:line' in the note").name;
  while (p.accept('@')) {
    SourceLoc begin = p.mark();
    std::string file = p.fileName();
    p.expect(':', "between a file and a line");
    bool first = true;
    do {
      SourceLoc at = p.mark();
      uint32_t line = static_cast<uint32_t>(p.integer(1, ReadLimits::kMaxSourceLines, "a line"));
      n.locs.push_back({file, line, p.from(first ? begin : at)});
      first = false;
    } while (p.accept(','));
  }
}

/// node ::= id '=' mnemonic [operands] [range] ':' ['index'] '[' width ']' ['bwd'] [note]
WrittenNode parseNode(LineParser &p, const std::vector<std::string> &mnemonics) {
  WrittenNode n;
  SourceLoc begin = p.mark();
  n.id = p.nodeId();
  n.where = p.from(begin);
  p.expect('=', "after the node's id");
  WrittenName op = p.name("an op");
  auto found = opFromMnemonic(op.name);
  if (!found) {
    std::string hint = closestName(op.name, mnemonics);
    p.failAt(op.where, fmt::format("unknown op '{}'{}", op.name, hint.empty() ? "" : "; did you mean '" + hint + "'?"));
  }
  n.op = *found;
  parseOperands(p, n);
  if (n.op == Op::Slice && !n.hasRange) p.fail("a slice says which elements it takes: slice %3[first:end]");
  p.expect(':', "before the node's type");
  SourceLoc typeBegin = p.mark();
  n.isIndex = p.acceptWord("index");
  p.expect('[', "to begin the node's width");
  n.width = p.integer(1, maxWidthOf(n.op), "a width");
  p.expect(']', "to close the node's width");
  n.typeWhere = p.from(typeBegin);
  n.backward = p.acceptWord("bwd");
  parseNote(p, n);
  p.expectEnd("the node");
  return n;
}

/// port ::= 'output' name '=' edge | 'loss' '=' edge
///        | 'grad' ('seed' | 'param' | 'input' | 'state') name '=' edge
WrittenPort parsePort(LineParser &p, PortKind kind) {
  WrittenPort port;
  port.kind = kind;
  if (kind != PortKind::Loss) port.name = p.name("a name");
  p.expect('=', "after the name");
  port.value = p.edge();
  p.expectEnd("the value");
  return port;
}

/// item ::= param | node | port | '}'   (one a line; blank lines and `//` comments anywhere)
class TextParser {
public:
  TextParser(const SourceManager &sm, uint32_t file, DiagnosticEngine &diags, GraphText &out)
      : text_(sm.text(file)), file_(file), diags_(diags), out_(out), mnemonics_(allMnemonics()) {
    uint64_t ids = uint64_t{ReadLimits::kNodeIdsPerByte} * text_.size();
    maxNodeId_ = static_cast<uint32_t>(std::min<uint64_t>(ReadLimits::kMaxNodeId, ids));
  }

  bool run() {
    bool ok = true;
    for (uint32_t begin = 0; begin <= text_.size();) {
      size_t nl = text_.find('\n', begin);
      uint32_t next =
          nl == std::string_view::npos ? static_cast<uint32_t>(text_.size()) + 1 : static_cast<uint32_t>(nl) + 1;
      uint32_t end = next - 1;
      if (end > begin && text_[end - 1] == '\r') --end;
      LineParser line(text_, file_, begin, end, maxNodeId_);
      try {
        statement(line);
      } catch (SyntaxError &e) {
        diags_.error(e.where, e.message);
        ok = false;
      }
      begin = next;
    }
    SourceLoc eof{file_, static_cast<uint32_t>(text_.size())};
    if (state_ == State::Header)
      diags_.error(eof, "expected 'graph NAME {': the file holds no graph");
    else if (state_ == State::Body)
      diags_.error(eof, "expected '}' to close the graph");
    return ok && state_ == State::Done;
  }

private:
  enum class State { Header, NoHeader, Body, Done };

  void statement(LineParser &p) {
    if (p.atEnd()) return;
    if (p.peek() == '#') p.fail("expected a statement: comments begin with '//' (a '#' note ends a node's line)");
    switch (state_) {
    case State::Header:
      // graph ::= 'graph' name '{' item* '}'
      // Nothing else makes sense without the header: one error, then stop.
      state_ = State::NoHeader;
      p.expectWord("graph", "to begin the file (graph NAME {)");
      out_.graph = p.name("the graph's name");
      p.expect('{', "after the graph's name");
      p.expectEnd("'{'");
      state_ = State::Body;
      return;
    case State::NoHeader: return;
    case State::Body: break;
    case State::Done: p.fail("unexpected text after the graph's closing '}'");
    }
    if (p.accept('}')) {
      p.expectEnd("the graph's closing '}'");
      state_ = State::Done;
    } else if (p.acceptWord("param")) {
      out_.params.push_back(parseParam(p));
    } else if (p.peek() == '%') {
      out_.nodes.push_back(parseNode(p, mnemonics_));
    } else if (p.acceptWord("output")) {
      out_.ports.push_back(parsePort(p, PortKind::Output));
    } else if (p.acceptWord("loss")) {
      out_.ports.push_back(parsePort(p, PortKind::Loss));
    } else if (p.acceptWord("next")) {
      // next ::= 'next' id   (ids below it that no statement defines were removed)
      SourceLoc begin = p.mark();
      if (out_.nextWhere.valid()) p.fail("'next' is given twice");
      out_.next = p.nodeId();
      out_.nextWhere = p.from(begin);
      p.expectEnd("the next id");
    } else if (p.acceptWord("grad")) {
      PortKind kind = PortKind::Seed;
      if (p.acceptWord("param"))
        kind = PortKind::ParamGrad;
      else if (p.acceptWord("input"))
        kind = PortKind::InputGrad;
      else if (p.acceptWord("state"))
        kind = PortKind::StateGrad;
      else if (!p.acceptWord("seed"))
        p.fail(fmt::format("expected seed, param, input or state after 'grad', found {}", p.shown()));
      out_.ports.push_back(parsePort(p, kind));
    } else {
      p.fail(fmt::format("expected a statement (param, %N = op ..., output, loss, grad, next or '}}'), found {}",
                         p.shown()));
    }
  }

  std::string_view text_;
  uint32_t file_;
  DiagnosticEngine &diags_;
  GraphText &out_;
  std::vector<std::string> mnemonics_;
  uint32_t maxNodeId_ = 0;
  State state_ = State::Header;
};

} // namespace

bool parseGraphText(const SourceManager &sm, uint32_t file, DiagnosticEngine &diags, GraphText &out) {
  return TextParser(sm, file, diags, out).run();
}

} // namespace rnnc

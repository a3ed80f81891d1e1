#include "frontend/ASTDump.h"

#include <fmt/format.h>

namespace rnnc {

namespace {

int precedence(const Expr &e) {
  if (e.kind != ExprKind::Binary) return 3;
  char op = as<BinaryExpr>(e).op;
  return op == '+' || op == '-' ? 1 : 2;
}

class Dumper {
public:
  Dumper(const SourceManager &sm) : sm_(sm) {}

  std::string run(const Module &m) {
    line(0, fmt::format("Module \"{}\"", sm_.name(m.file)), {});
    for (const auto &d : m.decls) decl(*d);
    return out_;
  }

private:
  void line(unsigned indent, const std::string &text, SourceRange r) {
    out_.append(indent * 2, ' ');
    out_ += text;
    if (r.valid()) {
      LineCol lc = sm_.lineCol(r.begin);
      out_ += fmt::format(" <{}:{}>", lc.line, lc.col);
    }
    out_ += '\n';
  }

  static std::string names(const std::vector<Ident> &ids) {
    std::string s;
    for (const auto &id : ids) s += (s.empty() ? "" : ", ") + id.name;
    return s;
  }

  void decl(const Decl &d) {
    switch (d.kind) {
    case DeclKind::Import: {
      const auto &i = static_cast<const ImportDecl &>(d);
      line(1, fmt::format("Import \"{}\"", i.path), d.range);
      break;
    }
    case DeclKind::Dim: {
      const auto &dim = static_cast<const DimDecl &>(d);
      line(1, fmt::format("Dim {} = {}", dim.name.name, exprToString(*dim.value)), d.range);
      break;
    }
    case DeclKind::Cell: {
      const auto &c = static_cast<const CellDecl &>(d);
      line(1, fmt::format("{} {}", c.isModel ? "Model" : "Cell", c.name.name), d.range);
      for (const auto &p : c.ports)
        line(2, fmt::format("Port {}: {}[{}]", p.name.name, p.isIndex ? "index" : "", exprToString(*p.size)),
             p.name.range);
      for (const auto &o : c.outputs) line(2, fmt::format("Output {}", o.name), o.range);
      for (const auto &s : c.body) stmt(*s);
      break;
    }
    }
  }

  void stmt(const Stmt &s) {
    if (s.kind == StmtKind::Param) {
      const auto &p = static_cast<const ParamDecl &>(s);
      std::string shape;
      for (const auto &e : p.shape) shape += (shape.empty() ? "" : ", ") + exprToString(*e);
      line(2, fmt::format("Param {}: [{}]", names(p.names), shape), s.range);
      return;
    }
    const auto &a = static_cast<const AssignStmt &>(s);
    line(2, fmt::format("Assign {}", names(a.targets)), s.range);
    expr(*a.value, 3);
  }

  void expr(const Expr &e, unsigned indent) {
    switch (e.kind) {
    case ExprKind::Number:
      line(indent, fmt::format("Number {}", as<NumberExpr>(e).spelling), e.range);
      break;
    case ExprKind::Name: {
      const auto &n = as<NameExpr>(e);
      std::string offset = n.hasOffset() ? fmt::format("[t{}{}]", n.timeOffset < 0 ? '-' : '+',
                                                       n.timeOffset < 0 ? -n.timeOffset : n.timeOffset)
                                         : "";
      line(indent, fmt::format("Name {}{}", n.name, offset), e.range);
      break;
    }
    case ExprKind::Unary:
      line(indent, "Negate", e.range);
      expr(*as<UnaryExpr>(e).operand, indent + 1);
      break;
    case ExprKind::Binary: {
      const auto &b = as<BinaryExpr>(e);
      static const char *names[] = {"Add", "Sub", "Mul", "Div", "MatMul"};
      const char *name = b.op == '+' ? names[0] : b.op == '-' ? names[1] : b.op == '*' ? names[2]
                       : b.op == '/' ? names[3] : names[4];
      line(indent, fmt::format("{} '{}'", name, b.op), b.opRange);
      expr(*b.lhs, indent + 1);
      expr(*b.rhs, indent + 1);
      break;
    }
    case ExprKind::Error:
      line(indent, "Error", e.range);
      break;
    case ExprKind::Call: {
      const auto &c = as<CallExpr>(e);
      line(indent, fmt::format("Call {}", c.callee.name), e.range);
      for (const auto &a : c.args) expr(*a, indent + 1);
      for (const auto &kw : c.keywordArgs)
        line(indent + 1, fmt::format("Keyword {} = {}", kw.name.name, exprToString(*kw.value)), kw.name.range);
      break;
    }
    }
  }

  const SourceManager &sm_;
  std::string out_;
};

} // namespace

std::string exprToString(const Expr &e) {
  switch (e.kind) {
  case ExprKind::Error: return "<error>";
  case ExprKind::Number: return as<NumberExpr>(e).spelling;
  case ExprKind::Name: {
    const auto &n = as<NameExpr>(e);
    if (!n.hasOffset()) return n.name;
    return fmt::format("{}[t{}{}]", n.name, n.timeOffset < 0 ? '-' : '+',
                       n.timeOffset < 0 ? -n.timeOffset : n.timeOffset);
  }
  case ExprKind::Unary: {
    const Expr &o = *as<UnaryExpr>(e).operand;
    return precedence(o) < 3 ? "-(" + exprToString(o) + ")" : "-" + exprToString(o);
  }
  case ExprKind::Binary: {
    const auto &b = as<BinaryExpr>(e);
    int p = precedence(e);
    std::string l = exprToString(*b.lhs), r = exprToString(*b.rhs);
    if (precedence(*b.lhs) < p) l = "(" + l + ")";
    if (precedence(*b.rhs) <= p) r = precedence(*b.rhs) == 3 ? r : "(" + r + ")";
    return l + (b.op == '*' || b.op == '/' ? std::string(1, b.op) : fmt::format(" {} ", b.op)) + r;
  }
  case ExprKind::Call: {
    const auto &c = as<CallExpr>(e);
    std::string s = c.callee.name + "(";
    bool first = true;
    for (const auto &a : c.args) {
      s += (first ? "" : ", ") + exprToString(*a);
      first = false;
    }
    for (const auto &kw : c.keywordArgs) {
      s += (first ? "" : ", ") + kw.name.name + " = " + exprToString(*kw.value);
      first = false;
    }
    return s + ")";
  }
  }
  return "?";
}

std::string dumpAST(const Module &module, const SourceManager &sm) { return Dumper(sm).run(module); }

} // namespace rnnc

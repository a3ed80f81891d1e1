// The AST as text (`rnnc show FILE --ast`): one node per line, indented by
// depth, each with its <line:col>. Sizes print inline as written; value
// expressions print as trees. Stable, so lit tests can match it.
#pragma once

#include "frontend/AST.h"

#include <string>

namespace rnnc {

std::string dumpAST(const Module &module, const SourceManager &sm);
/// A size or other expression printed back as infix text (fully parenthesized
/// where precedence needs it).
std::string exprToString(const Expr &e);

} // namespace rnnc

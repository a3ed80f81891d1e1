// The AST visitor behind collect(): kernels, calls and the expressions whose
// value is dropped, in one RecursiveASTVisitor pass over the main file. What
// counts as a kernel, a launch or a library call is docs/inspect.md's.
#include "Collect.h"

#include <clang/AST/Attr.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Lex/Lexer.h>

#include <map>
#include <set>

namespace rnnc::inspect {
namespace {

using namespace clang;

/// "a  +\n   b" -> "a + b": launch arguments read the same however the code is formatted.
std::string collapseSpace(llvm::StringRef text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

/// The status type a call returns ("cudaError_t"), or "" for any other type.
std::string statusType(QualType type) {
  const auto *e = type.getCanonicalType()->getAs<EnumType>();
  if (!e) return "";
  const EnumDecl *d = e->getDecl();
  std::string name = d->getName().str();
  if (name.empty())
    if (const TypedefNameDecl *t = d->getTypedefNameForAnonDecl()) name = t->getName().str();
  static const std::map<std::string, std::string> known = {
      {"cudaError", "cudaError_t"},       {"cudaError_t", "cudaError_t"}, {"cudaError_enum", "CUresult"},
      {"CUresult", "CUresult"},           {"cublasStatus_t", "cublasStatus_t"}, {"cublasStatus", "cublasStatus_t"},
      {"nvrtcResult", "nvrtcResult"},
  };
  auto it = known.find(name);
  return it == known.end() ? "" : it->second;
}

class Collector : public RecursiveASTVisitor<Collector> {
  using Base = RecursiveASTVisitor<Collector>;

public:
  Collector(ASTContext &ctx, bool cuda, unsigned lineOffset)
      : ctx_(ctx), sm_(ctx.getSourceManager()), cuda_(cuda), lineOffset_(lineOffset) {}

  Parsed found;

  /// Skips what the headers declare (only the main file is inspected).
  bool TraverseDecl(Decl *d) {
    if (!d) return true;
    if (!isa<TranslationUnitDecl>(d) && d->getDeclContext()->isTranslationUnit() && !inMain(d->getLocation()))
      return true;
    const auto *f = dyn_cast<FunctionDecl>(d);
    if (f) functions_.push_back(f);
    bool result = Base::TraverseDecl(d);
    if (f) functions_.pop_back();
    return result;
  }

  bool VisitFunctionDecl(FunctionDecl *f) {
    if (f->doesThisDeclarationHaveABody() && inMain(f->getLocation()) && isKernel(f))
      found.kernels.push_back(kernel(f));
    return true;
  }

  bool VisitVarDecl(VarDecl *v) {
    if (!inMain(v->getLocation()) || !v->getType()->isArrayType() || !v->hasInit()) return true;
    const auto *s = dyn_cast<StringLiteral>(v->getInit()->IgnoreParenImpCasts());
    if (!s || !s->isAscii() || s->getString().find("__global__") == llvm::StringRef::npos) return true;
    found.kernelStrings.push_back({v->getNameAsString(), s->getString().str(), lineOf(s->getBeginLoc())});
    return true;
  }

  // Statements whose expression is dropped: their calls' results are not checked.
  bool VisitCompoundStmt(CompoundStmt *s) {
    for (Stmt *child : s->body()) dropped(child);
    return true;
  }
  bool VisitIfStmt(IfStmt *s) { return dropped(s->getThen()), dropped(s->getElse()), true; }
  bool VisitForStmt(ForStmt *s) { return dropped(s->getBody()), dropped(s->getInc()), true; }
  bool VisitCXXForRangeStmt(CXXForRangeStmt *s) { return dropped(s->getBody()), true; }
  bool VisitWhileStmt(WhileStmt *s) { return dropped(s->getBody()), true; }
  bool VisitDoStmt(DoStmt *s) { return dropped(s->getBody()), true; }
  bool VisitSwitchCase(SwitchCase *s) { return dropped(s->getSubStmt()), true; }
  bool VisitLabelStmt(LabelStmt *s) { return dropped(s->getSubStmt()), true; }
  bool VisitAttributedStmt(AttributedStmt *s) { return dropped(s->getSubStmt()), true; }

  bool VisitCallExpr(CallExpr *c) {
    SourceLocation at = sm_.getFileLoc(c->getBeginLoc());
    if (!sm_.isInMainFile(at)) return true;
    if (const auto *k = dyn_cast<CUDAKernelCallExpr>(c)) return chevronLaunch(k, at), true;
    const FunctionDecl *callee = c->getDirectCallee();
    if (!callee) return true;
    std::string qualified = callee->getQualifiedNameAsString();
    if (qualified == "rnnc::cuda::launch" && c->getNumArgs() >= 5) {
      Site &s = site(Site::Kind::Launch, c, at, "bool");
      s.kernel = resolveKernel(c->getArg(0));
      if (const auto *what = dyn_cast<StringLiteral>(c->getArg(1)->IgnoreParenImpCasts())) s.what = what->getString().str();
      s.grid = text(c->getArg(2)), s.block = text(c->getArg(3)), s.stream = text(c->getArg(4));
      s.sharedMemory = "0"; // launch() passes no dynamic shared memory
      return true;
    }
    // launch_shared (a fused loop's kernel a step) and launch_cooperative (a persistent loop) take
    // their dynamic shared memory before the stream.
    if ((qualified == "rnnc::cuda::launch_shared" || qualified == "rnnc::cuda::launch_cooperative") && c->getNumArgs() >= 6) {
      Site &s = site(Site::Kind::Launch, c, at, "bool");
      s.kernel = resolveKernel(c->getArg(0));
      if (const auto *what = dyn_cast<StringLiteral>(c->getArg(1)->IgnoreParenImpCasts())) s.what = what->getString().str();
      s.grid = text(c->getArg(2)), s.block = text(c->getArg(3)), s.sharedMemory = text(c->getArg(4));
      s.stream = text(c->getArg(5));
      s.cooperative = qualified == "rnnc::cuda::launch_cooperative";
      return true;
    }
    if ((callee->getName() == "cudaLaunchKernel" || callee->getName() == "cudaLaunchCooperativeKernel") &&
        c->getNumArgs() == 6) {
      Site &s = site(Site::Kind::Launch, c, at, statusType(c->getType()));
      s.kernel = resolveKernel(c->getArg(0));
      s.grid = text(c->getArg(1)), s.block = text(c->getArg(2));
      s.sharedMemory = text(c->getArg(4)), s.stream = text(c->getArg(5));
      s.cooperative = callee->getName() == "cudaLaunchCooperativeKernel";
      return true;
    }
    if (qualified == "rnnc::cuda::load_kernels" && c->getNumArgs() == 4) {
      const VarDecl *names = variable(c->getArg(1)), *table = variable(c->getArg(3));
      if (names && table) tableNames_[table->getCanonicalDecl()] = names;
    }
    if (!cuda_ && isKernel(callee)) {
      site(Site::Kind::Launch, c, at, "").kernel = callee->getNameAsString();
      return true;
    }
    std::string status = statusType(c->getType());
    bool blas = !cuda_ && (callee->getName().startswith("cblas_") || qualified == "rnnc::cpu::gemm");
    if (status.empty() && !blas) return true;
    Site &s = site(Site::Kind::Library, c, at, status);
    s.callee = callee->getNameAsString();
    if (!functions_.empty()) {
      s.functionLine = lineOf(functions_.back()->getBeginLoc());
      s.functionComment = readComment(sm_, functions_.back()->getBeginLoc());
    }
    return true;
  }

  /// Marks each site whose call's value is dropped; the calls go with the AST.
  void markDropped() {
    for (size_t i = 0; i < found.sites.size(); ++i) found.sites[i].dropped = dropped_.count(calls_[i]) > 0;
  }

private:
  bool inMain(SourceLocation at) const { return at.isValid() && sm_.isInMainFile(sm_.getFileLoc(at)); }
  unsigned lineOf(SourceLocation at) const { return sm_.getPresumedLineNumber(sm_.getFileLoc(at)) + lineOffset_; }

  bool isKernel(const FunctionDecl *f) const {
    if (cuda_) return f->hasAttr<CUDAGlobalAttr>();
    // The CPU target's kernels: static void NAME(const Workspace &ws, ...).
    if (f->getStorageClass() != SC_Static || !f->getReturnType()->isVoidType() || f->getNumParams() == 0) return false;
    QualType first = f->getParamDecl(0)->getType();
    if (!first->isLValueReferenceType()) return false;
    QualType record = first->getPointeeType();
    const CXXRecordDecl *r = record->getAsCXXRecordDecl();
    return record.isConstQualified() && r && r->getName() == "Workspace";
  }

  static const VarDecl *variable(const Expr *e) {
    const auto *r = dyn_cast<DeclRefExpr>(e->IgnoreParenCasts());
    return r ? dyn_cast<VarDecl>(r->getDecl()) : nullptr;
  }

  /// The kernel a launch runs: a __global__ function (through casts and &), or
  /// TABLE[i] of a table initialized with kernels or filled by load_kernels. "" when unknown.
  std::string resolveKernel(const Expr *e) const {
    e = e->IgnoreParenCasts();
    if (const auto *u = dyn_cast<UnaryOperator>(e); u && u->getOpcode() == UO_AddrOf)
      e = u->getSubExpr()->IgnoreParenCasts();
    if (const auto *r = dyn_cast<DeclRefExpr>(e)) {
      if (const auto *f = dyn_cast<FunctionDecl>(r->getDecl())) return isKernel(f) ? f->getNameAsString() : "";
      return "";
    }
    const auto *a = dyn_cast<ArraySubscriptExpr>(e);
    if (!a) return "";
    const VarDecl *table = variable(a->getBase());
    Expr::EvalResult index;
    if (!table || !a->getIdx()->EvaluateAsInt(index, ctx_)) return "";
    int64_t i = index.Val.getInt().getExtValue();
    if (const Expr *init = table->getAnyInitializer())
      if (const auto *list = dyn_cast<InitListExpr>(init->IgnoreImplicit()))
        return i >= 0 && i < list->getNumInits() ? resolveKernel(list->getInit(static_cast<unsigned>(i))) : "";
    // No initializer: the table load_kernels fills, by the names it is given.
    auto names = tableNames_.find(table->getCanonicalDecl());
    if (names == tableNames_.end() || !names->second->getAnyInitializer()) return "";
    const auto *list = dyn_cast<InitListExpr>(names->second->getAnyInitializer()->IgnoreImplicit());
    if (!list || i < 0 || i >= list->getNumInits()) return "";
    const auto *s = dyn_cast<StringLiteral>(list->getInit(static_cast<unsigned>(i))->IgnoreParenImpCasts());
    return s ? s->getString().str() : "";
  }

  /// The source text of `e`, spaces collapsed (printed when it has no text of its own).
  std::string text(const Expr *e) const {
    if (const auto *d = dyn_cast<CXXDefaultArgExpr>(e)) e = d->getExpr();
    CharSourceRange range =
        Lexer::makeFileCharRange(CharSourceRange::getTokenRange(e->getSourceRange()), sm_, ctx_.getLangOpts());
    if (range.isValid()) return collapseSpace(Lexer::getSourceText(range, sm_, ctx_.getLangOpts()));
    std::string printed;
    llvm::raw_string_ostream os(printed);
    e->printPretty(os, nullptr, PrintingPolicy(ctx_.getLangOpts()));
    return collapseSpace(os.str());
  }

  std::string function() const {
    if (functions_.empty()) return "";
    const FunctionDecl *f = functions_.back();
    std::string name = f->getNameAsString();
    if (const auto *m = dyn_cast<CXXMethodDecl>(f)) name = m->getParent()->getNameAsString() + "::" + name;
    return name;
  }

  /// A new site of call `c`, in the enclosing function.
  Site &site(Site::Kind kind, const CallExpr *c, SourceLocation at, std::string status) {
    Site s;
    s.kind = kind;
    s.function = function();
    s.status = std::move(status);
    s.line = lineOf(at);
    found.sites.push_back(std::move(s));
    calls_.push_back(c);
    return found.sites.back();
  }

  void chevronLaunch(const CUDAKernelCallExpr *k, SourceLocation at) {
    Site &s = site(Site::Kind::Launch, k, at, "");
    s.kernel = k->getDirectCallee() ? k->getDirectCallee()->getNameAsString() : "";
    const CallExpr *config = k->getConfig();
    if (config && config->getNumArgs() >= 4) {
      s.grid = text(config->getArg(0)), s.block = text(config->getArg(1));
      s.sharedMemory = text(config->getArg(2)), s.stream = text(config->getArg(3));
    }
  }

  Kernel kernel(const FunctionDecl *f) const {
    Kernel k;
    k.name = f->getNameAsString();
    k.line = lineOf(f->getBeginLoc());
    for (const ParmVarDecl *p : f->parameters()) k.parameters.push_back({parameterType(p), p->getNameAsString()});
    if (const auto *bounds = f->getAttr<CUDALaunchBoundsAttr>()) {
      k.launchBounds = integer(bounds->getMaxThreads());
      if (bounds->getMinBlocks()) k.launchBounds += ", " + integer(bounds->getMinBlocks());
    }
    Comment comment = readComment(sm_, f->getBeginLoc());
    k.equations = std::move(comment.equations);
    k.helper = comment.helper;
    return k;
  }

  std::string integer(const Expr *e) const {
    Expr::EvalResult v;
    if (e && e->EvaluateAsInt(v, ctx_)) return std::to_string(v.Val.getInt().getExtValue());
    return e ? text(e) : "";
  }

  /// The type as written: the text from the parameter's start to its name.
  std::string parameterType(const ParmVarDecl *p) const {
    SourceLocation begin = sm_.getFileLoc(p->getBeginLoc()), name = sm_.getFileLoc(p->getLocation());
    if (!p->getName().empty() && begin.isValid() && name.isValid() && sm_.isWrittenInSameFile(begin, name) &&
        sm_.isBeforeInTranslationUnit(begin, name))
      return collapseSpace(Lexer::getSourceText(CharSourceRange::getCharRange(begin, name), sm_, ctx_.getLangOpts()));
    PrintingPolicy policy(ctx_.getLangOpts());
    policy.SuppressScope = true;
    return p->getType().getAsString(policy);
  }

  /// Marks the calls whose value statement `s` drops (through commas,
  /// conditionals and casts to void).
  void dropped(const Stmt *s) {
    const auto *e = dyn_cast_or_null<Expr>(s);
    if (!e) return;
    e = e->IgnoreParenImpCasts();
    if (const auto *cast = dyn_cast<ExplicitCastExpr>(e); cast && cast->getType()->isVoidType())
      return dropped(cast->getSubExpr());
    if (const auto *b = dyn_cast<BinaryOperator>(e); b && b->getOpcode() == BO_Comma)
      return dropped(b->getLHS()), dropped(b->getRHS());
    if (const auto *c = dyn_cast<ConditionalOperator>(e)) return dropped(c->getTrueExpr()), dropped(c->getFalseExpr());
    if (const auto *call = dyn_cast<CallExpr>(e)) dropped_.insert(call);
  }

  ASTContext &ctx_;
  SourceManager &sm_;
  bool cuda_;
  unsigned lineOffset_;
  std::vector<const FunctionDecl *> functions_;
  std::vector<const CallExpr *> calls_; // the call of each of found.sites
  std::set<const CallExpr *> dropped_;
  std::map<const VarDecl *, const VarDecl *> tableNames_; // kernel table -> its names, from load_kernels
};

} // namespace

Parsed collect(ASTContext &ctx, bool cuda, unsigned lineOffset) {
  Collector collector(ctx, cuda, lineOffset);
  collector.TraverseAST(ctx);
  collector.markDropped();
  return std::move(collector.found);
}

} // namespace rnnc::inspect

// inspect(): parses one emitted source with clang (a .cu as CUDA host code, a
// .cpp as C++17 with OpenMP, a --jit kernel string as NVRTC sees it) and walks
// the main file's AST for kernels, launches and library calls; then names
// the problems. The rules are spelled out in docs/inspect.md.
//
// 1. Parse: the embedded stand-in headers (Shims.h) are virtual files under
//    kShimDir, first on the include path; CUDA gets the forced-include prelude.
// 2. Collect (Collector): kernel definitions, calls (launches, library calls,
//    direct calls of CPU kernels), the expressions whose value is dropped,
//    kernel tables filled by load_kernels, and string variables holding
//    __global__ code (a --jit kernel string).
// 3. A kernel string found in a C++ parse is parsed again as CUDA (step 1
//    with __CUDACC_RTC__) and its kernels join the host part's, lines mapped
//    to the .cpp.
// 4. Launches are tied to kernels by name; then the problems are listed.
#include "Inspect.h"

#include "Shims.h"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Attr.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Frontend/ASTUnit.h>
#include <clang/Lex/Lexer.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <map>
#include <memory>
#include <regex>
#include <set>

namespace rnnc::inspect {
namespace {

using namespace clang;

constexpr const char *kShimDir = "/rnnc-inspect/include";
constexpr const char *kPrelude = "/rnnc-inspect/include/rnnc_inspect_cuda.h";

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

/// What a call site was found to be, before launches are tied to kernels.
struct Site {
  enum class Kind { Launch, Library } kind;
  const CallExpr *call = nullptr;
  std::string function;
  std::string status; // the type of what the call returns, when it is a status; "bool" for rnnc's launch()
  unsigned line = 0;
  bool dropped = false; // the call's value is dropped (set after the walk)
  // Library calls:
  std::string callee;
  // Launches:
  std::string kernel;  // resolved kernel name, "" when it cannot be told
  std::string what;    // launch()'s name for the error message, "" when none
  std::string grid, block, stream, sharedMemory;
};

/// A string variable holding __global__ code: a --jit bundle's kernels.
struct KernelString {
  std::string variable, text;
  unsigned line = 0; // of the literal's first character
};

/// Step 2: one pass over the declarations of the main file.
class Collector : public RecursiveASTVisitor<Collector> {
  using Base = RecursiveASTVisitor<Collector>;

public:
  Collector(ASTContext &ctx, bool cuda, unsigned lineOffset)
      : ctx_(ctx), sm_(ctx.getSourceManager()), cuda_(cuda), lineOffset_(lineOffset) {}

  std::vector<Kernel> kernels;
  std::vector<Site> sites;
  std::vector<KernelString> kernelStrings;

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
    if (f->doesThisDeclarationHaveABody() && inMain(f->getLocation()) && isKernel(f)) kernels.push_back(kernel(f));
    return true;
  }

  bool VisitVarDecl(VarDecl *v) {
    if (!inMain(v->getLocation()) || !v->getType()->isArrayType() || !v->hasInit()) return true;
    const auto *s = dyn_cast<StringLiteral>(v->getInit()->IgnoreParenImpCasts());
    if (!s || !s->isAscii() || s->getString().find("__global__") == llvm::StringRef::npos) return true;
    kernelStrings.push_back({v->getNameAsString(), s->getString().str(), lineOf(s->getBeginLoc())});
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
      Site s = site(Site::Kind::Launch, c, at, "bool");
      s.kernel = resolveKernel(c->getArg(0));
      if (const auto *what = dyn_cast<StringLiteral>(c->getArg(1)->IgnoreParenImpCasts())) s.what = what->getString().str();
      s.grid = text(c->getArg(2)), s.block = text(c->getArg(3)), s.stream = text(c->getArg(4));
      s.sharedMemory = "0"; // launch() passes no dynamic shared memory
      sites.push_back(s);
      return true;
    }
    if (callee->getName() == "cudaLaunchKernel" && c->getNumArgs() == 6) {
      Site s = site(Site::Kind::Launch, c, at, statusType(c->getType()));
      s.kernel = resolveKernel(c->getArg(0));
      s.grid = text(c->getArg(1)), s.block = text(c->getArg(2));
      s.sharedMemory = text(c->getArg(4)), s.stream = text(c->getArg(5));
      sites.push_back(s);
      return true;
    }
    if (qualified == "rnnc::cuda::load_kernels" && c->getNumArgs() == 4) {
      const VarDecl *names = variable(c->getArg(1)), *table = variable(c->getArg(3));
      if (names && table) tableNames_[table->getCanonicalDecl()] = names;
    }
    if (!cuda_ && isKernel(callee)) {
      Site s = site(Site::Kind::Launch, c, at, "");
      s.kernel = callee->getNameAsString();
      sites.push_back(s);
      return true;
    }
    std::string status = statusType(c->getType());
    bool blas = !cuda_ && (callee->getName().startswith("cblas_") || qualified == "rnnc::cpu::gemm");
    if (status.empty() && !blas) return true;
    Site s = site(Site::Kind::Library, c, at, status);
    s.callee = callee->getNameAsString();
    sites.push_back(s);
    return true;
  }

  /// Whether call `c`'s value is dropped (a statement of its own, or cast to void).
  bool isDropped(const CallExpr *c) const { return dropped_.count(c) > 0; }

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

  Site site(Site::Kind kind, const CallExpr *c, SourceLocation at, std::string status) const {
    Site s{kind, c, function(), std::move(status), lineOf(at), false, {}, {}, {}, {}, {}, {}, {}};
    return s;
  }

  void chevronLaunch(const CUDAKernelCallExpr *k, SourceLocation at) {
    Site s = site(Site::Kind::Launch, k, at, "");
    s.kernel = k->getDirectCallee() ? k->getDirectCallee()->getNameAsString() : "";
    const CallExpr *config = k->getConfig();
    if (config && config->getNumArgs() >= 4) {
      s.grid = text(config->getArg(0)), s.block = text(config->getArg(1));
      s.sharedMemory = text(config->getArg(2)), s.stream = text(config->getArg(3));
    }
    sites.push_back(s);
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
    readComment(f, k);
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

  /// The `//` lines right above the kernel: `FILE.rnn:LINE` after the `//`
  /// names an equation; a block whose first line starts "rnnc helper:" marks a helper.
  void readComment(const FunctionDecl *f, Kernel &k) const {
    SourceLocation at = sm_.getExpansionLoc(f->getBeginLoc());
    FileID file = sm_.getFileID(at);
    llvm::StringRef buffer = sm_.getBufferData(file);
    unsigned offset = sm_.getFileOffset(at);
    // The start of the kernel's line, then each line above it in turn
    // (StringRef::rfind(c, from) looks before `from`).
    size_t lineStart = buffer.rfind('\n', offset);
    lineStart = lineStart == llvm::StringRef::npos ? 0 : lineStart + 1;
    std::vector<llvm::StringRef> block;
    while (lineStart > 0) {
      size_t end = lineStart - 1; // the '\n' ending the line above
      size_t start = buffer.rfind('\n', end);
      start = start == llvm::StringRef::npos ? 0 : start + 1;
      llvm::StringRef line = buffer.slice(start, end).trim();
      if (!line.startswith("//")) break;
      block.push_back(line.drop_while([](char c) { return c == '/'; }));
      lineStart = start;
    }
    std::reverse(block.begin(), block.end());
    static const std::regex equation(R"(^\s+([\w./-]+\.rnn):(\d+)(\s|$))");
    for (llvm::StringRef line : block) {
      std::smatch m;
      std::string s = line.str();
      if (std::regex_search(s, m, equation)) k.equations.push_back(m[1].str() + ":" + m[2].str());
    }
    k.helper = !block.empty() && block.front().trim().startswith("rnnc helper:");
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
  std::set<const CallExpr *> dropped_;
  std::map<const VarDecl *, const VarDecl *> tableNames_; // kernel table -> its names, from load_kernels
};

/// What one parse found.
struct Parsed {
  std::vector<Kernel> kernels;
  std::vector<Site> sites;
  std::vector<KernelString> kernelStrings;
};

/// Step 1: clang's arguments for `language` ("cuda", "c++", or "nvrtc": a kernel string).
std::vector<std::string> arguments(const std::string &language, const Options &options) {
  std::vector<std::string> args = {"-resource-dir", RNNC_INSPECT_RESOURCE_DIR, "-isystem", kShimDir,
                                   "-I",           options.runtimeInclude,    "-w",       "-ferror-limit=20"};
  if (language == "c++") {
    args.insert(args.end(), {"-x", "c++", "-std=c++17", "-fopenmp"});
  } else {
    args.insert(args.end(), {"-x", "cuda", "-std=c++17", "--cuda-host-only", "-nocudainc", "-nocudalib", "-include",
                             kPrelude});
    if (language == "nvrtc") args.push_back("-D__CUDACC_RTC__");
  }
  return args;
}

/// Steps 1 and 2 on `code`, named `path`; lines are shifted by `lineOffset`.
std::optional<Parsed> parse(const std::string &code, const std::string &path, const std::string &language,
                            unsigned lineOffset, const Options &options, std::string &error) {
  tooling::FileContentMappings shims;
  for (size_t i = 0; i < kShimCount; ++i) shims.emplace_back(std::string(kShimDir) + "/" + kShims[i].name, kShims[i].text);
  std::unique_ptr<ASTUnit> ast = tooling::buildASTFromCodeWithArgs(
      code, arguments(language, options), path, "rnnc-inspect", std::make_shared<PCHContainerOperations>(),
      tooling::getClangStripDependencyFileAdjuster(), shims);
  if (!ast) {
    error = "clang could not be run on it";
    return std::nullopt;
  }
  if (ast->getDiagnostics().hasErrorOccurred()) {
    error = "does not parse";
    return std::nullopt;
  }
  Collector collector(ast->getASTContext(), language != "c++", lineOffset);
  collector.TraverseAST(ast->getASTContext());
  Parsed parsed{std::move(collector.kernels), std::move(collector.sites), std::move(collector.kernelStrings)};
  for (Site &s : parsed.sites) {
    s.dropped = collector.isDropped(s.call);
    s.call = nullptr; // the AST goes with this function
  }
  return parsed;
}

/// Step 4: launches to their kernels, library calls kept, problems named.
Inspection assemble(const std::string &path, const std::string &language, Parsed &host, std::vector<Kernel> kernels,
                    const std::string &kernelString) {
  Inspection out;
  out.file = path;
  out.language = language;
  out.kernelString = kernelString;
  out.kernels = std::move(kernels);
  std::map<std::string, size_t> byName;
  for (size_t i = 0; i < out.kernels.size(); ++i) byName[out.kernels[i].name] = i;
  auto problem = [&](const char *kind, std::string message, unsigned line) {
    out.problems.push_back({kind, std::move(message), line});
  };
  for (const Site &s : host.sites) {
    bool dropped = s.dropped;
    if (s.kind == Site::Kind::Library) {
      bool checked = s.status.empty() || !dropped;
      out.libraryCalls.push_back({s.callee, s.function, s.status, checked, s.line});
      if (!checked)
        problem("unchecked-status", "the " + s.status + " that " + s.callee + "() returns is not checked", s.line);
      continue;
    }
    if (!s.status.empty() && dropped)
      problem("unchecked-status",
              "the " + s.status + " of the launch of " + (s.kernel.empty() ? "a kernel" : "'" + s.kernel + "'") +
                  " is not checked",
              s.line);
    auto k = byName.find(s.kernel);
    if (s.kernel.empty() || k == byName.end()) {
      problem("unknown-kernel",
              s.kernel.empty() ? "cannot tell which kernel this launch runs"
                               : "the launched '" + s.kernel + "' is no kernel of this file",
              s.line);
      continue;
    }
    if (!s.what.empty() && s.what != s.kernel)
      problem("launch-name-mismatch", "the launch of '" + s.kernel + "' calls it \"" + s.what + "\" in its error message",
              s.line);
    out.kernels[k->second].launches.push_back({s.function, s.grid, s.block, s.stream, s.sharedMemory, s.line});
  }
  for (const Kernel &k : out.kernels) {
    if (k.helper) continue; // rnnc's helpers: no equation, and a model may not need them
    if (k.launches.empty()) problem("never-launched", "kernel '" + k.name + "' is never launched", k.line);
    if (k.equations.empty())
      problem("no-equation", "the comment above kernel '" + k.name + "' names no equation (FILE.rnn:LINE)", k.line);
  }
  std::stable_sort(out.problems.begin(), out.problems.end(),
                   [](const Problem &a, const Problem &b) { return a.line < b.line; });
  return out;
}

} // namespace

std::optional<Inspection> inspect(const std::string &path, const Options &options, std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    error = buffer.getError().message();
    return std::nullopt;
  }
  llvm::SmallString<256> absolute(path);
  llvm::sys::fs::make_absolute(absolute);
  std::string code = (*buffer)->getBuffer().str();
  std::optional<Parsed> host = parse(code, absolute.str().str(), options.language, 0, options, error);
  if (!host) return std::nullopt;
  std::vector<Kernel> kernels = std::move(host->kernels);
  std::string kernelString;
  // Step 3: a --jit host part's kernels, parsed as NVRTC would.
  for (const KernelString &s : host->kernelStrings) {
    std::string name = absolute.str().str() + ":" + s.variable + ".cu";
    std::optional<Parsed> device = parse(s.text, name, "nvrtc", s.line - 1, options, error);
    if (!device) {
      error = "the kernel string " + s.variable + ": " + error;
      return std::nullopt;
    }
    for (Kernel &k : device->kernels) kernels.push_back(std::move(k));
    for (Site &site : device->sites) host->sites.push_back(std::move(site));
    kernelString = s.variable;
  }
  return assemble(path, options.language, *host, std::move(kernels), kernelString);
}

} // namespace rnnc::inspect

#include "frontend/Frontend.h"

namespace rnnc {

std::unique_ptr<FrontendResult> runFrontend(const std::string &path, const FrontendOptions &options,
                                            const std::string *text) {
  auto r = std::make_unique<FrontendResult>();
  r->diags = std::make_unique<DiagnosticEngine>(r->sm);
  r->diags->setColor(options.color);
  r->diags->setCapture(options.capture);
  try {
    Loader loader(r->sm, *r->diags);
    r->loaded = text ? loader.loadBuffer(path, *text, r->program) : loader.load(path, r->program);
    if (r->loaded) r->sema = Sema(r->program, *r->diags).run(options.dims);
  } catch (TooManyErrors &) {
    // Reported; the result has errors.
  }
  return r;
}

} // namespace rnnc

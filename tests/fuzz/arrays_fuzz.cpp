// libFuzzer target for the array readers: the input is written to a file and
// read as .npy and as safetensors (with its metadata), as `rnnc run --inputs`
// and `--params` read them. A reader must refuse bad bytes with a message,
// never crash, leak or allocate what the file does not hold. See
// docs/reliability.md.
#include "FuzzFile.h"
#include "io/Npy.h"
#include "io/Safetensors.h"

#include <cstdlib>
#include <map>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const rnnc::fuzz::ScratchFile file("arrays");
  file.write(data, size);
  std::string error;
  if (auto a = rnnc::io::readNpy(file.path(), error)) {
    // What was read is consistent with its shape.
    if (a->elements() != static_cast<int64_t>(a->data.size())) std::abort();
  } else if (error.rfind(file.path(), 0) != 0) {
    std::abort();  // every error names the file first
  }
  error.clear();
  std::map<std::string, std::string> metadata;
  if (auto tensors = rnnc::io::readSafetensors(file.path(), error, &metadata)) {
    for (const auto &t : *tensors)
      if (t.array.elements() != static_cast<int64_t>(t.array.data.size())) std::abort();
  } else {
    if (error.rfind(file.path(), 0) != 0) std::abort();
    (void)rnnc::io::describeTruncation(file.path());
  }
  return 0;
}

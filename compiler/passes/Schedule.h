// schedule: puts the stages in the order they are issued (time-parallel work
// of level 0, the loops of level 1, time-parallel work of level 1, ...), finds
// which stage needs which, and puts stages with no path between them on
// separate streams, with an event wherever a stage waits for another stream.
// At -O0, stages in a row that can run in one direction merge into one loop on
// one stream: every op of every step in time order, the paper's baseline.
#pragma once

#include "passes/Compilation.h"

namespace rnnc {

void schedule(Compilation &c);

} // namespace rnnc

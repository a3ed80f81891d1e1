// The optimizers and gradient clipping of the training runtime (rnnc/optim.h)
// against values worked out by hand from their defining formulas.
#include "rnnc/optim.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace rnnc::rt;

TEST_CASE("train: SGD with momentum follows v = mu*v + g, p -= lr*v", "[train]") {
  Sgd sgd(2, 0.1, 0.9);
  std::vector<float> p = {1.0f, -2.0f};
  const float g[2] = {0.5f, 1.0f};
  sgd.step(p.data(), g);
  // v = (0.5, 1); p = (1 - 0.05, -2 - 0.1)
  CHECK(p[0] == Approx(0.95).epsilon(1e-6));
  CHECK(p[1] == Approx(-2.1).epsilon(1e-6));
  sgd.step(p.data(), g);
  // v = (0.9*0.5 + 0.5, 0.9*1 + 1) = (0.95, 1.9); p = (0.95 - 0.095, -2.1 - 0.19)
  CHECK(p[0] == Approx(0.855).epsilon(1e-6));
  CHECK(p[1] == Approx(-2.29).epsilon(1e-6));
  REQUIRE(sgd.slots().size() == 1);
  CHECK(sgd.slots()[0].name == "v");
  CHECK(sgd.slots()[0].values[1] == Approx(1.9).epsilon(1e-6));
  CHECK(sgd.steps() == 2);
}

TEST_CASE("train: Adam with bias correction", "[train]") {
  Adam adam(1, 0.1);
  std::vector<float> p = {1.0f};
  float g = 0.5f;
  adam.step(p.data(), &g);
  // t=1: m = 0.05, v = 0.00025; m^ = 0.5, v^ = 0.25; p = 1 - 0.1 * 0.5 / (0.5 + 1e-8)
  CHECK(p[0] == Approx(0.9).epsilon(1e-6));
  g = -1.0f;
  adam.step(p.data(), &g);
  // t=2: m = 0.9*0.05 - 0.1 = -0.055, v = 0.999*0.00025 + 0.001 = 0.00124975
  //      m^ = -0.055/0.19, v^ = 0.00124975/0.001999
  const double mhat = -0.055 / 0.19, vhat = 0.00124975 / 0.001999;
  CHECK(p[0] == Approx(0.9 - 0.1 * mhat / (std::sqrt(vhat) + 1e-8)).epsilon(1e-5));
  REQUIRE(adam.slots().size() == 2);
  CHECK(adam.slots()[0].name == "m");
  CHECK(adam.slots()[1].name == "v");
  CHECK(adam.slots()[0].values[0] == Approx(-0.055).epsilon(1e-6));
  CHECK(adam.slots()[1].values[0] == Approx(0.00124975).epsilon(1e-5));
}

TEST_CASE("train: Adam's step count drives the bias correction after a restore", "[train]") {
  // A restored optimizer (slots and step count) continues exactly like one that never stopped.
  Adam a(3, 0.01), b(3, 0.01);
  std::vector<float> pa = {0.1f, 0.2f, 0.3f};
  const float g1[3] = {0.3f, -0.2f, 0.1f}, g2[3] = {-0.5f, 0.25f, 1.0f};
  a.step(pa.data(), g1);
  std::vector<float> pb = pa;
  b.slots() = a.slots();
  b.setSteps(a.steps());
  a.step(pa.data(), g2);
  b.step(pb.data(), g2);
  CHECK(pa == pb);
}

TEST_CASE("train: optimizer names, defaults and bad settings", "[train]") {
  std::string error;
  auto adam = makeOptimizer("adam", 4, 0, 0.9, error);
  REQUIRE(adam);
  CHECK(std::string(adam->name()) == "adam");
  CHECK(adam->learningRate() == 1e-3);
  auto sgd = makeOptimizer("sgd", 4, 0, 0.9, error);
  REQUIRE(sgd);
  CHECK(sgd->learningRate() == 0.1);
  CHECK_FALSE(makeOptimizer("rmsprop", 4, 0, 0.9, error));
  CHECK(error == "unknown optimizer 'rmsprop' (expected adam or sgd)");
  CHECK_FALSE(makeOptimizer("adam", 4, -1, 0.9, error));
  CHECK(error == "the learning rate must be a positive number, not -1");
  CHECK_FALSE(makeOptimizer("sgd", 4, 0.1, 1.5, error));
  CHECK(error == "the momentum must be in [0, 1), not 1.5");
}

TEST_CASE("train: clipping by global L2 norm", "[train]") {
  std::vector<float> g = {3.0f, 4.0f};
  CHECK(clipGradNorm(g.data(), 2, 10.0) == Approx(5.0));
  CHECK(g == std::vector<float>{3.0f, 4.0f});  // under the limit: untouched
  CHECK(clipGradNorm(g.data(), 2, 0.0) == Approx(5.0));
  CHECK(g == std::vector<float>{3.0f, 4.0f});  // 0: off
  CHECK(clipGradNorm(g.data(), 2, 1.0) == Approx(5.0));
  CHECK(g[0] == Approx(0.6).epsilon(1e-5));  // scaled by 1 / (5 + 1e-6)
  CHECK(g[1] == Approx(0.8).epsilon(1e-5));
  CHECK(clipGradNorm(g.data(), 2, 1.0) == Approx(1.0).epsilon(1e-5));

  std::vector<float> bad = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  CHECK(std::isnan(clipGradNorm(bad.data(), 2, 1.0)));
  CHECK(bad[0] == 1.0f);  // not scaled
}

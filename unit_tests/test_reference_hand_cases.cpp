// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Plans worked out by hand from docs/spec/planning.md, step by step, in the
// comments above each case; the expected arrays were written from those
// derivations, never from running the planner. Each case targets particular
// rules:
//
//  case 1  R=2 E=4 K=2 S=4 B=1 tp=1  one donor, copy to the receiver, G order
//                                     across source ranks, dedup incl. a token
//                                     naming one expert twice, dup structures
//  case 2  same routing, tp=4          padding, zero_fill_ranges, -1 slots of
//                                     src_info inside the padded groups
//  case 3  R=4 E=8 K=1 S=4 B=2 tp=1  a donor that goes negative and later
//                                     receives; ties to the lowest rank in
//                                     step 2 and to the lowest local index in
//                                     step 3; an expert split over three ranks
//  case 4  R=2 E=8 K=2 S=2 B=1 tp=3  copy tie to the larger expert id, more
//                                     remote experts than B (one keeps its
//                                     g<E group), a -1 copy slot
//  case 5  R=1 E=2 K=3 S=2 B=1 tp=3  one rank; a token naming one expert three
//                                     times (two duplicates per group)
//  case 6  R=2 E=4 K=2 S=2 B=1 tp=1  a token naming one expert twice whose
//                                     entries land on two ranks (no dedup)
//  case 7  R=3 E=6 K=1 S=4 B=1 tp=2  step 3 serves the largest quota first,
//                                     not the lowest rank
//  case 8  R=2 E=8 K=1 S=4 B=2 tp=1  copies in decreasing count (not id)
//                                     order; step 3 tie after a partial take
//  case 9  R=5 E=5 K=1 S=4 B=1 tp=1  a deficit tie whose order decides which
//                                     donor serves which receiver
//
// Ragged steps (docs/spec/planning.md "Ragged steps"; T = sum s_r*K,
// CAP_r = T div R + (r < T mod R)):
//  case R1  R=2 E=4 K=2 S=4 B=1 tp=1, s = [4, 0]     a rank with no tokens
//                                                    still receives CAP_1 = 4
//  case R2  R=3 E=3 K=1 S=4 B=1 tp=1, s = [1, 4, 2]  one full rank; T mod R
//                                                    = 1 puts the remainder
//                                                    on rank 0
//  case R3  R=4 E=4 K=2 S=2 B=1 tp=1, s = [1, 2, 0, 2]  T mod R = 2: ranks 0
//                                                    and 1 take one more;
//                                                    three receivers of one
//                                                    donor, dedup on each
//  case R4  R=2 E=2 K=2 S=3 B=1 tp=2, s = [0, 0]     an empty step
//
// Notation: tpe[r][e], cum, total, load, balance, z, alloc, acum as in
// docs/spec/planning.md; NvS = round_up(S*K + 2*epn*(tp-1), tp); dst = d*NvS +
// loff; src_info = r*NvS + i; a duplicate is stored as -dst-1.
#include "catch2_compat.hpp"

#include <cstdint>
#include <map>
#include <vector>

#include "moonep/backend.hpp"
#include "moonep/reference.hpp"
#include "moonep/synthetic.hpp"
#include "support/plan_invariants.hpp"

namespace {

using V = std::vector<std::int32_t>;
using DupSets = std::map<std::int32_t, V>;  // primary loff -> duplicate loffs (increasing k)

moonep::Config config(int R, int E, int K, int S, int B, int tp) {
  moonep::Config c;
  c.ranks = R; c.experts = E; c.topk = K; c.tokens = S; c.copy_slots = B; c.token_padding = tp;
  return c;
}

struct RankExpect {
  V dst, cu_seqlens, zero_fill_ranges, remote_stats, src_info;
  DupSets dups;
};

// The plan's dup rows read as a set (row order may vary, docs/spec/planning.md
// step 8).
DupSets dup_sets(const moonep::HostRankPlan& p) {
  DupSets out;
  for (std::size_t row = 0; row + 2 < p.dup_groups.size(); row += 3) {
    const std::int32_t start = p.dup_groups[row + 1], n = p.dup_groups[row + 2];
    REQUIRE(start >= 0);
    REQUIRE(static_cast<std::size_t>(start) + n <= p.dup_loffs.size());
    out[p.dup_groups[row]] = V(p.dup_loffs.begin() + start, p.dup_loffs.begin() + start + n);
  }
  return out;
}

V repeat(V head, std::size_t total, std::int32_t fill) {
  head.resize(total, fill);
  return head;
}

void check_plan(const moonep::Config& c, const moonep::Routing& routing,
                const moonep::HostPlan& plan, const V& experts_to_copy,
                const std::vector<RankExpect>& want, const moonep::TokensPerRank* tokens = nullptr) {
  REQUIRE(plan.ranks.size() == want.size());
  for (std::size_t d = 0; d < want.size(); ++d) {
    INFO("rank " << d);
    const auto& p = plan.ranks[d];
    const auto& x = want[d];
    CHECK(p.dst == x.dst);
    CHECK(p.cu_seqlens == x.cu_seqlens);
    CHECK(p.zero_fill_ranges == x.zero_fill_ranges);
    CHECK(p.experts_to_copy == experts_to_copy);
    CHECK(p.remote_stats == x.remote_stats);
    CHECK(p.src_info == x.src_info);
    std::int32_t n_dups = 0;
    for (const auto& g : x.dups) n_dups += static_cast<std::int32_t>(g.second.size());
    CHECK(p.dup_counts == V{static_cast<std::int32_t>(x.dups.size()), n_dups});
    CHECK(dup_sets(p) == x.dups);
  }
  // The hand-computed plan also satisfies every invariant (and the checker
  // accepts a plan known to be right).
  CHECK(check_plan_invariants(c, routing, plan, tokens) == "");
  // Handing in the matching tokens_per_expert changes nothing.
  const auto tpe = moonep::count_tokens_per_expert(c, routing);
  CHECK(moonep::plan_difference(moonep::plan_reference(c, routing, &tpe, tokens), plan) == "");
}

// A ragged step's plan (docs/spec/planning.md "Ragged steps"): as above,
// the plan repeating the counts, and the reference HostPlanner agreeing.
void check_ragged_plan(const moonep::Config& c, const moonep::Routing& routing, const moonep::TokensPerRank& tokens,
                       const V& experts_to_copy, std::vector<RankExpect> want) {
  const moonep::HostPlan plan = moonep::plan_reference(c, routing, nullptr, &tokens);
  REQUIRE(plan.tokens_per_rank);
  CHECK(*plan.tokens_per_rank == tokens);
  for (auto& w : want) w.zero_fill_ranges.assign(2 * static_cast<std::size_t>(c.groups()), 0);  // tp = 1 or empty
  check_plan(c, routing, plan, experts_to_copy, want, &tokens);
  auto planner = moonep::make_host_planner(moonep::Backend::reference, c);
  planner->load(routing, nullptr, &tokens);
  planner->step();
  CHECK(moonep::plan_difference(planner->result(), plan) == "");
}

// Routing shared by cases 1 and 2 (token-major, K=2, 4 tokens per rank).
const moonep::Routing kRouting12 = {
    {0, 1, 0, 1, 1, 0, 2, 0},  // rank 0: tokens (0,1) (0,1) (1,0) (2,0)
    {0, 1, 3, 0, 1, 1, 0, 2},  // rank 1: tokens (0,1) (3,0) (1,1) (0,2)
};

}  // namespace

// Case 1: R=2 E=4 K=2 S=4 B=1 tp=1. epn=2 (rank 0 owns e0,e1; rank 1 e2,e3),
// CAP=8, NvS=8.
//  tpe[0] = [4,3,1,0] (e0 at i0,2,5,7; e1 at i1,3,4; e2 at i6)
//  tpe[1] = [3,3,1,1] (e0 at i0,3,6; e1 at i1,4,5; e3 at i2; e2 at i7)
//  total = [7,6,2,1], load = [13,3], balance = [5,-5]
//  step 2: sr=0, dr=1, move 5 -> z[0][1]=5; balance [0,0] stop.
//  step 3 h=0: quota[1]=5, remaining [7,6] -> j=0 takes 5: alloc[1][0]=5,
//          alloc[0][0]=2. h=1: no quota.
//  alloc[0] = [2,6,0,0], alloc[1] = [5,0,2,1]
//  step 4: rank 0 has no remote entries -> remote_stats[0][0]=0, slot -1;
//          rank 1 remote e0=5 -> remote_stats[1][0]=1, picks e0, which adds 1
//          to remote_stats[0][1]. experts_to_copy = [[-1],[0]].
//  step 5 rank 0: g0 e0 [0,2), g1 e1 [2,8), g2,g3 empty, g4 (-1) empty
//          -> cu = [2,8,8,8,8]; offsets e0=0 e1=2.
//         rank 1: g0 (e0 picked) empty, g1 e1 count 0, g2 e2 [0,2),
//          g3 e3 [2,3), g4 = e0 [3,8) -> cu = [0,0,2,3,8]; offsets e2=0 e3=2 e0=3.
//  step 6: acum e0=[2,7] e1=[6,6] e2=[0,2] e3=[0,1]; cum[0] = [4,3,1,0].
//   rank 0: i0 e0 G0->d0 loff0 =0 | i1 e1 G0->d0 2 =2 | i2 e0 G1->d0 1 =1 |
//           i3 e1 G1->d0 3 =3 | i4 e1 G2->d0 4 =4 | i5 e0 G2->d1 3+0 =11 |
//           i6 e2 G0->d1 0 =8 | i7 e0 G3->d1 3+1 =12
//   rank 1: i0 e0 G4->d1 3+2 =13 | i1 e1 G3->d0 2+3 =5 | i2 e3 G0->d1 2 =10 |
//           i3 e0 G5->d1 6 =14 | i4 e1 G4->d0 6 =6 | i5 e1 G5->d0 7 =7 |
//           i6 e0 G6->d1 7 =15 | i7 e2 G1->d1 1 =9
//   src_info[0] = [0,2,1,3,4,9,12,13], src_info[1] = [6,15,10,5,7,8,11,14]
//  step 7 (pairs per token): r0 (0,2)->(0,-3) (1,3)->(1,-4) (4,11) keep
//          (8,12)->(8,-13); r1 (13,5) keep (10,14)->(10,-15)
//          (6,7)->(6,-8) [token naming e1 twice] (15,9)->(15,-10)
//  step 8: rank 0 {0:[2], 1:[3], 6:[7]}; rank 1 {0:[4], 2:[6], 7:[1]}
TEST_CASE("hand case 1: one donor, a copy, G order across ranks, dedup") {
  const auto c = config(2, 4, 2, 4, 1, 1);
  REQUIRE(c.slots() == 8);
  const auto plan = moonep::plan_reference(c, kRouting12);
  check_plan(c, kRouting12, plan, V{-1, 0},
             {
                 {V{0, -3, 1, -4, 4, 11, 8, -13}, V{2, 8, 8, 8, 8}, V(10, 0), V{0, 1},
                  V{0, 2, 1, 3, 4, 9, 12, 13}, DupSets{{0, {2}}, {1, {3}}, {6, {7}}}},
                 {V{13, 5, 10, -15, 6, -8, 15, -10}, V{0, 0, 2, 3, 8}, V(10, 0), V{1, 0},
                  V{6, 15, 10, 5, 7, 8, 11, 14}, DupSets{{0, {4}}, {2, {6}}, {7, {1}}}},
             });
}

// Case 2: case 1's routing with tp=4. NvS = round_up(8 + 2*2*3, 4) = 20.
//  Steps 1-4 as case 1 (they do not depend on tp).
//  step 5 rank 0: g0 e0 count 2 -> padded 4, [0,4), zero fill (2,2);
//          g1 e1 count 6 -> 8, [4,12), zero fill (10,2); rest empty.
//          cu = [4,12,12,12,12]; offsets e0=0 e1=4.
//         rank 1: g0 (picked) 0, g1 0, g2 e2 2 -> [0,4) zf (2,2),
//          g3 e3 1 -> [4,8) zf (5,3), g4 e0 5 -> [8,16) zf (13,3).
//          cu = [0,0,4,8,16]; offsets e2=0 e3=4 e0=8.
//  step 6 (G and d as case 1, new offsets):
//   rank 0: i0 0 | i1 4 | i2 1 | i3 5 | i4 6 | i5 d1 8 -> 28 | i6 d1 0 -> 20 |
//           i7 d1 9 -> 29
//   rank 1: i0 d1 8+2 -> 30 | i1 d0 4+3 = 7 | i2 d1 4 -> 24 | i3 d1 11 -> 31 |
//           i4 d0 8 | i5 d0 9 | i6 d1 12 -> 32 | i7 d1 1 -> 21
//   src_info[0]: 0<-r0i0=0, 1<-r0i2=2, 4<-r0i1=1, 5<-r0i3=3, 6<-r0i4=4,
//                7<-r1i1=21, 8<-r1i4=24, 9<-r1i5=25, others -1
//   src_info[1]: 0<-r0i6=6, 1<-r1i7=27, 4<-r1i2=22, 8<-r0i5=5, 9<-r0i7=7,
//                10<-r1i0=20, 11<-r1i3=23, 12<-r1i6=26, others -1
//  step 7: r0 (0,4)->(0,-5) (1,5)->(1,-6) (6,28) keep (20,29)->(20,-30);
//          r1 (30,7) keep (24,31)->(24,-32) (8,9)->(8,-10) (32,21)->(32,-22)
//  step 8: rank 0 {0:[4], 1:[5], 8:[9]}; rank 1 {0:[9], 4:[11], 12:[1]}
TEST_CASE("hand case 2: padding to tp, zero_fill_ranges, empty slots") {
  const auto c = config(2, 4, 2, 4, 1, 4);
  REQUIRE(c.slots() == 20);
  const auto plan = moonep::plan_reference(c, kRouting12);
  check_plan(c, kRouting12, plan, V{-1, 0},
             {
                 {V{0, -5, 1, -6, 6, 28, 20, -30}, V{4, 12, 12, 12, 12},
                  V{2, 2, 10, 2, 0, 0, 0, 0, 0, 0}, V{0, 1},
                  repeat(V{0, 2, -1, -1, 1, 3, 4, 21, 24, 25}, 20, -1),
                  DupSets{{0, {4}}, {1, {5}}, {8, {9}}}},
                 {V{30, 7, 24, -32, 8, -10, 32, -22}, V{0, 0, 4, 8, 16},
                  V{0, 0, 0, 0, 2, 2, 5, 3, 13, 3}, V{1, 0},
                  repeat(V{6, 27, -1, -1, 22, -1, -1, -1, 5, 7, 20, 23, 26}, 20, -1),
                  DupSets{{0, {9}}, {4, {11}}, {12, {1}}}},
             });
}

// Case 3: R=4 E=8 K=1 S=4 B=2 tp=1. epn=2, CAP=4, NvS=4.
//  routing: r0 [0,1,2,3], r1 [3,2,1,0], r2 [7,6,0,1], r3 [2,3,4,7]
//  total = [3,3,3,3,1,0,1,2], load = [6,6,1,3], balance = [2,2,-3,-1]
//  step 2: surplus 2 at ranks 0,1 -> lowest 0; deficit -3 at 2: move 3,
//          z[0][2]=3, balance [-1,2,0,-1]  (donor 0 went negative)
//          surplus 2 at 1; deficit -1 at ranks 0,3 -> lowest 0: move 1,
//          z[1][0]=1, balance [0,1,0,-1]   (the former donor receives)
//          surplus 1 at 1; deficit -1 at 3: z[1][3]=1, balance all 0, stop.
//  step 3 h=0: quota[2]=3; remaining [3,3] tie -> j=0: take 3,
//          alloc[2][0]=3, alloc[0][0]=0.
//         h=1: quota [1,0,0,1] tie -> t=0; remaining [3,3] tie -> j=0:
//          take 1, alloc[0][2]=1, remaining [2,3]; then t=3, j=1: take 1,
//          alloc[3][3]=1, remaining [2,2].
//  alloc[0]=[0,3,1,0,0,0,0,0] alloc[1]=[0,0,2,2,0,0,0,0]
//  alloc[2]=[3,0,0,0,1,0,0,0] alloc[3]=[0,0,0,1,0,0,1,2]
//  step 4 (B=2): rank 0 remote e2=1 -> [2,-1]; rank 1 none -> [-1,-1];
//          rank 2 remote e0=3 -> [0,-1]; rank 3 remote e3=1 -> [3,-1].
//          remote_stats: r0 (1 remote, 1 copy of e0), r1 (0, 2: e2 and e3),
//          r2 (1, 0), r3 (1, 0).
//  step 5: rank 0 (e2 picked): g1 e1 [0,3), g8 e2 [3,4) -> cu [0,3,3,3,3,3,3,3,4,4]
//          rank 1: g2 e2 [0,2), g3 e3 [2,4) -> cu [0,0,2,4,4,4,4,4,4,4]
//          rank 2 (e0 picked): g4 e4 [0,1), g8 e0 [1,4) -> cu [0,0,0,0,1,1,1,1,4,4]
//          rank 3 (e3 picked): g6 e6 [0,1), g7 e7 [1,3), g8 e3 [3,4)
//                              -> cu [0,0,0,0,0,0,1,3,4,4]
//  step 6: acum e0=[0,0,3,3] e1=[3,3,3,3] e2=[1,3,3,3] e3=[0,2,2,3]
//          e4=[0,0,1,1] e6=[0,0,0,1] e7=[0,0,0,2]
//   e0: G0 r0i0, G1 r1i3, G2 r2i2 -> rank 2 slots 1,2,3 -> 9,10,11
//   e1: G0 r0i1, G1 r1i2, G2 r2i3 -> rank 0 slots 0,1,2 -> 0,1,2
//   e2: G0 r0i2 -> rank 0 slot 3 -> 3; G1 r1i1, G2 r3i0 -> rank 1 slots 0,1 -> 4,5
//   e3: G0 r0i3, G1 r1i0 -> rank 1 slots 2,3 -> 6,7; G2 r3i1 -> rank 3 slot 3 -> 15
//   e4: r3i2 -> rank 2 slot 0 -> 8;  e6: r2i1 -> rank 3 slot 0 -> 12
//   e7: G0 r2i0, G1 r3i3 -> rank 3 slots 1,2 -> 13,14
//   dst: r0 [9,0,3,6] r1 [7,4,1,10] r2 [13,12,11,2] r3 [5,15,8,14]
//   src_info: r0 [1,6,11,2] r1 [5,12,3,4] r2 [14,0,7,10] r3 [9,8,15,13]
//  K=1: no dedup, no dup groups.
TEST_CASE("hand case 3: a donor goes negative and receives; ties to the lowest rank and index") {
  const auto c = config(4, 8, 1, 4, 2, 1);
  REQUIRE(c.slots() == 4);
  const moonep::Routing routing = {{0, 1, 2, 3}, {3, 2, 1, 0}, {7, 6, 0, 1}, {2, 3, 4, 7}};
  const auto plan = moonep::plan_reference(c, routing);
  const V no_fill(20, 0);
  check_plan(c, routing, plan, V{2, -1, -1, -1, 0, -1, 3, -1},
             {
                 {V{9, 0, 3, 6}, V{0, 3, 3, 3, 3, 3, 3, 3, 4, 4}, no_fill, V{1, 1}, V{1, 6, 11, 2}, {}},
                 {V{7, 4, 1, 10}, V{0, 0, 2, 4, 4, 4, 4, 4, 4, 4}, no_fill, V{0, 2}, V{5, 12, 3, 4}, {}},
                 {V{13, 12, 11, 2}, V{0, 0, 0, 0, 1, 1, 1, 1, 4, 4}, no_fill, V{1, 0}, V{14, 0, 7, 10}, {}},
                 {V{5, 15, 8, 14}, V{0, 0, 0, 0, 0, 0, 1, 3, 4, 4}, no_fill, V{1, 0}, V{9, 8, 15, 13}, {}},
             });
}

// Case 4: R=2 E=8 K=2 S=2 B=1 tp=3. epn=4, CAP=4,
// NvS = round_up(4 + 2*4*2, 3) = 21.
//  routing: r0 [0,1, 2,3], r1 [0,1, 3,2]; total = [2,2,2,2,0,0,0,0]
//  load = [8,0], balance [4,-4] -> z[0][1]=4.
//  step 3 h=0: remaining [2,2,2,2]: j=0 takes 2 (quota 2 left), then j=1
//          takes 2. alloc[0] = [0,0,2,2,0,0,0,0], alloc[1] = [2,2,0,...].
//  step 4: rank 0 no remote -> [-1], remote_stats[0][0]=0.
//          rank 1 remote e0=2, e1=2 (2 remote experts > B=1): tie -> larger
//          id e1. remote_stats[1][0]=2, remote_stats[0][1]=1.
//  step 5 rank 0: g2 e2 2 -> [0,3) zf (2,1); g3 e3 -> [3,6) zf (5,1)
//          cu [0,0,3,6,6,6,6,6,6]
//         rank 1: g0 e0 (not picked, keeps its group) [0,3) zf (2,1);
//          g1 (picked) empty; g8 e1 [3,6) zf (5,1). cu [3,3,3,3,3,3,3,3,6]
//  step 6: acum e0=[0,2] e1=[0,2] e2=[2,2] e3=[2,2]
//   r0: i0 e0 G0 d1 0 -> 21 | i1 e1 G0 d1 3 -> 24 | i2 e2 d0 0 | i3 e3 d0 3
//   r1: i0 e0 G1 d1 1 -> 22 | i1 e1 G1 d1 4 -> 25 | i2 e3 G1 d0 4 | i3 e2 G1 d0 1
//   src_info[0]: 0<-2, 1<-r1i3=24, 3<-3, 4<-r1i2=23; [1]: 0<-0, 1<-21, 3<-1, 4<-22
//  step 7: r0 (21,24)->(21,-25) (0,3)->(0,-4); r1 (22,25)->(22,-26) (4,1)->(4,-2)
//  step 8: rank 0 {0:[3], 4:[1]}; rank 1 {0:[3], 1:[4]}
TEST_CASE("hand case 4: copy tie to the larger expert id, more remote experts than B") {
  const auto c = config(2, 8, 2, 2, 1, 3);
  REQUIRE(c.slots() == 21);
  const moonep::Routing routing = {{0, 1, 2, 3}, {0, 1, 3, 2}};
  const auto plan = moonep::plan_reference(c, routing);
  check_plan(c, routing, plan, V{-1, 1},
             {
                 {V{21, -25, 0, -4}, V{0, 0, 3, 6, 6, 6, 6, 6, 6},
                  V{0, 0, 0, 0, 2, 1, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, V{0, 1},
                  repeat(V{2, 24, -1, 3, 23}, 21, -1), DupSets{{0, {3}}, {4, {1}}}},
                 {V{22, -26, 4, -2}, V{3, 3, 3, 3, 3, 3, 3, 3, 6},
                  V{2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 1}, V{2, 0},
                  repeat(V{0, 21, -1, 1, 22}, 21, -1), DupSets{{0, {3}}, {1, {4}}}},
             });
}

// Case 5: R=1 E=2 K=3 S=2 B=1 tp=3. CAP=6, NvS = round_up(6 + 2*2*2, 3) = 15.
//  routing [1,0,1, 0,0,0]; total [4,2]; balance 0, nothing moves or is copied.
//  step 5: g0 e0 4 -> [0,6) zf (4,2); g1 e1 2 -> [6,9) zf (8,1); g2 empty.
//  step 6: e0 entries i1,i3,i4,i5 -> slots 0..3; e1 entries i0,i2 -> 6,7.
//          raw dst [6,0,7,1,2,3]; src_info 0<-1 1<-3 2<-4 3<-5 6<-0 7<-2.
//  step 7: token 0 (6,0,7) -> (6,-1,-8); token 1 (1,2,3) -> (1,-3,-4).
//  step 8: {6:[0,7], 1:[2,3]} (duplicates in k order, not slot order).
TEST_CASE("hand case 5: one rank, a token naming one expert three times") {
  const auto c = config(1, 2, 3, 2, 1, 3);
  REQUIRE(c.slots() == 15);
  const moonep::Routing routing = {{1, 0, 1, 0, 0, 0}};
  const auto plan = moonep::plan_reference(c, routing);
  check_plan(c, routing, plan, V{-1},
             {{V{6, -1, -8, 1, -3, -4}, V{6, 9, 9}, V{4, 2, 8, 1, 0, 0}, V{0, 0},
               repeat(V{1, 3, 4, 5, -1, -1, 0, 2}, 15, -1), DupSets{{6, {0, 7}}, {1, {2, 3}}}}});
}

// Case 6: R=2 E=4 K=2 S=2 B=1 tp=1. CAP=4, NvS=4.
//  routing: r0 [1,0, 0,0], r1 [0,0, 0,1]; tpe[0] = [3,1,0,0] = tpe[1]
//  total [6,2,0,0], load [8,0], z[0][1]=4.
//  step 3 h=0: remaining [6,2]: j=0 takes 4 -> alloc[0]=[2,2,0,0], alloc[1]=[4,0,0,0].
//  step 4: rank 0 [-1]; rank 1 copies e0. remote_stats r0 (0,1), r1 (1,0).
//  step 5: rank 0 g0 e0 [0,2), g1 e1 [2,4) -> cu [2,4,4,4,4];
//          rank 1 g4 e0 [0,4) -> cu [0,0,0,0,4].
//  step 6: acum e0=[2,6] e1=[2,2]; e0 entries G0 r0i1, G1 r0i2 -> rank 0
//          slots 0,1; G2 r0i3, G3 r1i0, G4 r1i1, G5 r1i2 -> rank 1 slots 0..3;
//          e1: r0i0 -> rank 0 slot 2, r1i3 -> rank 0 slot 3.
//          raw r0 [2,0,1,4], r1 [5,6,7,3]
//  step 7: r0 token 0 (2,0)->(2,-1); token 1 (1,4) names e0 twice but lands on
//          ranks 0 and 1: both kept. r1 (5,6)->(5,-7); (7,3) kept.
//  src_info r0 [1,2,0,7], r1 [3,4,5,6]; step 8: rank 0 {2:[0]}, rank 1 {1:[2]}.
TEST_CASE("hand case 6: one expert twice in a token, split over two ranks") {
  const auto c = config(2, 4, 2, 2, 1, 1);
  const moonep::Routing routing = {{1, 0, 0, 0}, {0, 0, 0, 1}};
  const auto plan = moonep::plan_reference(c, routing);
  check_plan(c, routing, plan, V{-1, 0},
             {
                 {V{2, -1, 1, 4}, V{2, 4, 4, 4, 4}, V(10, 0), V{0, 1}, V{1, 2, 0, 7}, DupSets{{2, {0}}}},
                 {V{5, -7, 7, 3}, V{0, 0, 0, 0, 4}, V(10, 0), V{1, 0}, V{3, 4, 5, 6}, DupSets{{1, {2}}}},
             });
}

// Case 7: R=3 E=6 K=1 S=4 B=1 tp=2. epn=2, CAP=4, NvS = round_up(4 + 2*2*1, 2) = 8.
//  routing: r0 [0,0,1,2], r1 [0,1,0,5], r2 [1,3,0,2]
//  total = [5,3,2,1,0,1], load = [8,3,1], balance = [4,-1,-3]
//  step 2: deficit -3 at rank 2 first: z[0][2]=3, balance [1,-1,0];
//          then z[0][1]=1.
//  step 3 h=0: quota [0,1,3] -> the largest, rank 2, first: remaining [5,3],
//          j=0 takes 3 (alloc[2][0]=3, remaining [2,3]); then rank 1: j=1
//          (now the largest) takes 1 (alloc[1][1]=1). Serving rank 1 first
//          would have sent it e0 instead.
//  alloc[0] = [2,2,0,0,0,0], alloc[1] = [0,1,2,1,0,0], alloc[2] = [3,0,0,0,0,1]
//  step 4: rank 0 [-1]; rank 1 copies e1; rank 2 copies e0.
//          remote_stats r0 (0,2), r1 (1,0), r2 (1,0).
//  step 5: rank 0: g0 e0 [0,2), g1 e1 [2,4), no padding -> cu [2,4,4,4,4,4,4]
//          rank 1: g2 e2 [0,2), g3 e3 1 -> [2,4) zf (3,1), g6 e1 1 -> [4,6) zf (5,1)
//                  -> cu [0,0,2,4,4,4,6]
//          rank 2: g5 e5 1 -> [0,2) zf (1,1), g6 e0 3 -> [2,6) zf (5,1)
//                  -> cu [0,0,0,0,0,2,6]
//  step 6: acum e0=[2,2,5] e1=[2,3,3] e2=[0,2,2] e3=[0,1,1] e5=[0,0,1]
//   e0: G0 r0i0, G1 r0i1 -> rank 0 slots 0,1; G2 r1i0, G3 r1i2, G4 r2i2 ->
//       rank 2 slots 2,3,4 (dst 18,19,20)
//   e1: G0 r0i2, G1 r1i1 -> rank 0 slots 2,3; G2 r2i0 -> rank 1 slot 4 (12)
//   e2: G0 r0i3, G1 r2i3 -> rank 1 slots 0,1 (8,9); e3: r2i1 -> rank 1 slot 2 (10)
//   e5: r1i3 -> rank 2 slot 0 (16)
//   dst r0 [0,1,2,8], r1 [18,3,19,16], r2 [12,10,20,9]
//   src_info r0 [0,1,2,9,-1,-1,-1,-1], r1 [3,19,17,-1,16,-1,-1,-1],
//            r2 [11,-1,8,10,18,-1,-1,-1]
TEST_CASE("hand case 7: step 3 serves the largest quota first") {
  const auto c = config(3, 6, 1, 4, 1, 2);
  REQUIRE(c.slots() == 8);
  const moonep::Routing routing = {{0, 0, 1, 2}, {0, 1, 0, 5}, {1, 3, 0, 2}};
  const auto plan = moonep::plan_reference(c, routing);
  check_plan(c, routing, plan, V{-1, 1, 0},
             {
                 {V{0, 1, 2, 8}, V{2, 4, 4, 4, 4, 4, 4}, V(14, 0), V{0, 2},
                  V{0, 1, 2, 9, -1, -1, -1, -1}, {}},
                 {V{18, 3, 19, 16}, V{0, 0, 2, 4, 4, 4, 6}, V{0, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 0, 5, 1},
                  V{1, 0}, V{3, 19, 17, -1, 16, -1, -1, -1}, {}},
                 {V{12, 10, 20, 9}, V{0, 0, 0, 0, 0, 2, 6}, V{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 5, 1},
                  V{1, 0}, V{11, -1, 8, 10, 18, -1, -1, -1}, {}},
             });
}

// Case 8: R=2 E=8 K=1 S=4 B=2 tp=1. epn=4, CAP=4, NvS=4.
//  routing: r0 [0,2,3,0], r1 [1,0,3,2]; total = [3,1,2,2,0,0,0,0]
//  load [8,0] -> z[0][1]=4.
//  step 3 h=0: remaining [3,1,2,2]: j=0 takes 3 (quota 1 left); remaining
//          [0,1,2,2] tie -> j=2 takes 1.
//  alloc[0] = [0,1,1,2,0,0,0,0], alloc[1] = [3,0,1,0,0,0,0,0]
//  step 4 (B=2): rank 1 remote e0=3, e2=1 -> slots [0,2] (count order;
//          id order would give [2,0]). rank 0 [-1,-1].
//          remote_stats r0 (0,2), r1 (2,0).
//  step 5: rank 0: g1 e1 [0,1), g2 e2 [1,2), g3 e3 [2,4) -> cu [0,1,2,4,4,4,4,4,4,4]
//          rank 1: g0, g2 picked (empty), g8 e0 [0,3), g9 e2 [3,4)
//                  -> cu [0,0,0,0,0,0,0,0,3,4]
//  step 6: acum e0=[0,3] e1=[1,1] e2=[1,2] e3=[2,2]
//   r0: i0 e0 G0 -> r1 slot 0 (4) | i1 e2 G0 -> r0 slot 1 | i2 e3 G0 -> r0 slot 2 |
//       i3 e0 G1 -> r1 slot 1 (5)
//   r1: i0 e1 G0 -> r0 slot 0 | i1 e0 G2 -> r1 slot 2 (6) | i2 e3 G1 -> r0 slot 3 |
//       i3 e2 G1 -> r1 slot 3 + 0 (7)
//   src_info r0 [4,1,2,6], r1 [0,3,5,7]
TEST_CASE("hand case 8: copies in decreasing remote count, not id, order") {
  const auto c = config(2, 8, 1, 4, 2, 1);
  const moonep::Routing routing = {{0, 2, 3, 0}, {1, 0, 3, 2}};
  const auto plan = moonep::plan_reference(c, routing);
  check_plan(c, routing, plan, V{-1, -1, 0, 2},
             {
                 {V{4, 1, 2, 5}, V{0, 1, 2, 4, 4, 4, 4, 4, 4, 4}, V(20, 0), V{0, 2}, V{4, 1, 2, 6}, {}},
                 {V{0, 6, 3, 7}, V{0, 0, 0, 0, 0, 0, 0, 0, 3, 4}, V(20, 0), V{2, 0}, V{0, 3, 5, 7}, {}},
             });
}

// Case 9: R=5 E=5 K=1 S=4 B=1 tp=1. epn=1 (rank r owns expert r), CAP=4, NvS=4.
//  routing: r0 [0,0,0,1], r1 [1,1,0,0], r2 [0,1,2,4], r3 [3,1,0,2], r4 [4,1,3,4]
//  total = load = [7,6,2,2,3], balance = [3,2,-2,-2,-1]
//  step 2: surplus 3 at rank 0; deficit -2 at ranks 2,3 -> lowest, 2:
//          z[0][2]=2, balance [1,2,0,-2,-1]; then rank 1 (2) -> rank 3:
//          z[1][3]=2; then rank 0 (1) -> rank 4: z[0][4]=1. (Breaking the
//          first tie to rank 3 would pair rank 0 with 3 and rank 1 with 2.)
//  step 3: h=0 quota [0,0,2,0,1]: alloc[2][0]=2, alloc[4][0]=1, alloc[0][0]=4;
//          h=1: alloc[3][1]=2, alloc[1][1]=4.
//  step 4: ranks 0,1 [-1]; rank 2 copies e0, rank 3 e1, rank 4 e0.
//          remote_stats r0 (0,2), r1 (0,1), r2..r4 (1,0).
//  step 5: cu r0 [4,4,4,4,4,4], r1 [0,4,4,4,4,4], r2 [0,0,2,2,2,4] (e2 [0,2),
//          e0 [2,4)), r3 [0,0,0,2,2,4] (e3 [0,2), e1 [2,4)),
//          r4 [0,0,0,0,3,4] (e4 [0,3), e0 [3,4)).
//  step 6: acum e0=[4,4,6,6,7] e1=[0,4,4,6,6] e2=[0,0,2,2,2] e3=[0,0,0,2,2]
//          e4=[0,0,0,0,3]
//   e0: r0i0 r0i1 r0i2 r1i2 -> rank 0 slots 0..3; r1i3 r2i0 -> rank 2 slots 2,3
//       (10,11); r3i2 -> rank 4 slot 3 (19)
//   e1: r0i3 r1i0 r1i1 r2i1 -> rank 1 slots 0..3 (4..7); r3i1 r4i1 -> rank 3
//       slots 2,3 (14,15)
//   e2: r2i2 r3i3 -> rank 2 slots 0,1 (8,9); e3: r3i0 r4i2 -> rank 3 slots 0,1
//       (12,13); e4: r2i3 r4i0 r4i3 -> rank 4 slots 0..2 (16,17,18)
//   dst r0 [0,1,2,4] r1 [5,6,3,10] r2 [11,7,8,16] r3 [12,14,19,9] r4 [17,15,13,18]
//   src_info r0 [0,1,2,6] r1 [3,4,5,9] r2 [10,15,7,8] r3 [12,18,13,17]
//            r4 [11,16,19,14]
TEST_CASE("hand case 9: a deficit tie goes to the lowest rank") {
  const auto c = config(5, 5, 1, 4, 1, 1);
  const moonep::Routing routing = {{0, 0, 0, 1}, {1, 1, 0, 0}, {0, 1, 2, 4}, {3, 1, 0, 2}, {4, 1, 3, 4}};
  const auto plan = moonep::plan_reference(c, routing);
  const V no_fill(12, 0);
  check_plan(c, routing, plan, V{-1, -1, 0, 1, 0},
             {
                 {V{0, 1, 2, 4}, V{4, 4, 4, 4, 4, 4}, no_fill, V{0, 2}, V{0, 1, 2, 6}, {}},
                 {V{5, 6, 3, 10}, V{0, 4, 4, 4, 4, 4}, no_fill, V{0, 1}, V{3, 4, 5, 9}, {}},
                 {V{11, 7, 8, 16}, V{0, 0, 2, 2, 2, 4}, no_fill, V{1, 0}, V{10, 15, 7, 8}, {}},
                 {V{12, 14, 19, 9}, V{0, 0, 0, 2, 2, 4}, no_fill, V{1, 0}, V{12, 18, 13, 17}, {}},
                 {V{17, 15, 13, 18}, V{0, 0, 0, 0, 3, 4}, no_fill, V{1, 0}, V{11, 16, 19, 14}, {}},
             });
}

TEST_CASE("the reference HostPlanner gives the hand-computed plan too") {
  const auto c = config(4, 8, 1, 4, 2, 1);
  const moonep::Routing routing = {{0, 1, 2, 3}, {3, 2, 1, 0}, {7, 6, 0, 1}, {2, 3, 4, 7}};
  const auto via_planner = moonep::plan_host(moonep::Backend::reference, c, routing);
  CHECK(moonep::plan_difference(via_planner, moonep::plan_reference(c, routing)) == "");
  CHECK(via_planner.ranks[3].dst == V{5, 15, 8, 14});
}

// Case R1: R=2 E=4 K=2 S=4 B=1 tp=1, s = [4, 0]. epn=2, NvS=8.
//  N = [8, 0], T = 8, CAP = [4, 4].
//  rank 0's routing is hand case 1's: tpe[0] = [4,3,1,0] (e0 at i0,2,5,7;
//  e1 at i1,3,4; e2 at i6); tpe[1] = 0.
//  total = [4,3,1,0], load = [7,1], balance = [7-4, 1-4] = [3,-3]
//  step 2: move 3 from 0 to 1, z[0][1] = 3; balances 0: stop.
//  step 3 h=0: quota[1]=3, remaining [4,3] -> j=0 takes 3: alloc[1][0]=3,
//          alloc[0][0]=1.
//  alloc[0] = [1,3,0,0], alloc[1] = [3,0,1,0]
//  step 4: rank 0 no remote entries -> [0,.], slot -1; rank 1 remote e0=3
//          -> copies e0, remote_stats[1][0]=1, remote_stats[0][1]=1.
//  step 5 rank 0: g0 e0 [0,1), g1 e1 [1,4) -> cu [1,4,4,4,4].
//         rank 1: g0 picked, g1 0, g2 e2 [0,1), g3 0, g4 e0 [1,4)
//          -> cu [0,0,1,1,4]; offsets e2=0, e0=1.
//  step 6: acum e0 = [1,4], e1 = [3,3], e2 = [0,1].
//   i0 e0 G0 -> d0 0 | i1 e1 G0 -> d0 1 | i2 e0 G1 -> d1 1+0 = 9 |
//   i3 e1 G1 -> d0 2 | i4 e1 G2 -> d0 3 | i5 e0 G2 -> d1 1+1 = 10 |
//   i6 e2 G0 -> d1 0 = 8 | i7 e0 G3 -> d1 1+2 = 11
//   src_info[0] = [0,1,3,4,-1..], src_info[1] = [6,2,5,7,-1..]
//  step 7: tokens (0,1) both on d0 -> i1 = -2; (9,2) (3,10) keep;
//          (8,11) both on d1 -> i7 = -12.
//  step 8: rank 0 {0:[1]}, rank 1 {0:[3]}.
TEST_CASE("ragged case R1: a rank with no tokens still receives its share") {
  const moonep::Config c{2, 4, 2, 4, 1, 1};
  const moonep::Routing routing = {{0, 1, 0, 1, 1, 0, 2, 0}, {}};
  check_ragged_plan(c, routing, {4, 0}, {-1, 0},
             {{{0, -2, 9, 2, 3, 10, 8, -12}, {1, 4, 4, 4, 4}, {}, {0, 1}, {0, 1, 3, 4, -1, -1, -1, -1}, {{0, {1}}}},
              {{}, {0, 0, 1, 1, 4}, {}, {1, 0}, {6, 2, 5, 7, -1, -1, -1, -1}, {{0, {3}}}}});
}

// Case R2: R=3 E=3 K=1 S=4 B=1 tp=1, s = [1, 4, 2]. epn=1, NvS=4.
//  routing: rank 0 [2], rank 1 [1,1,2,1], rank 2 [1,0].
//  N = [1,4,2], T = 7, CAP = 7 div 3 + (r < 1) = [3,2,2].
//  tpe[0] = [0,0,1], tpe[1] = [0,3,1], tpe[2] = [1,1,0]
//  total = load = [1,4,2], balance = [-2,2,0]
//  step 2: move 2 from 1 to 0, z[1][0] = 2; all 0: stop.
//  step 3 h=1: quota[0]=2 takes 2 of e1: alloc[0][1]=2, alloc[1][1]=2.
//  alloc[0] = [1,2,0], alloc[1] = [0,2,0], alloc[2] = [0,0,2]
//  step 4: rank 0 copies e1 (remote_stats [1,0]; rank 1's [0,1]); ranks 1
//          and 2 have no remote entries (-1).
//  step 5 rank 0: g0 e0 [0,1), g1 picked, g2 0, g3 e1 [1,3) -> cu [1,1,1,3]
//         rank 1: g1 e1 [0,2) -> cu [0,2,2,2]; rank 2: g2 e2 [0,2) -> [0,0,2,2]
//  step 6: acum e0 = [1,1,1], e1 = [2,4,4], e2 = [0,0,2];
//          cum[r-1]: e0 [0,0,1], e1 [0,3,4], e2 [0,1,2].
//   rank 0: i0 e2 G0 -> d2 0 = 8
//   rank 1: i0 e1 G0 -> d0 1 | i1 e1 G1 -> d0 2 | i2 e2 G1 -> d2 1 = 9 |
//           i3 e1 G2 -> d1 (p=2) 0 = 4
//   rank 2: i0 e1 G3 -> d1 1 = 5 | i1 e0 G0 -> d0 0
//   src_info[0] = [9,4,5,-1], [1] = [7,8,-1,-1], [2] = [0,6,-1,-1]
//  K = 1: no dedup.
TEST_CASE("ragged case R2: one full rank, the remainder on the lowest rank") {
  const moonep::Config c{3, 3, 1, 4, 1, 1};
  const moonep::Routing routing = {{2}, {1, 1, 2, 1}, {1, 0}};
  check_ragged_plan(c, routing, {1, 4, 2}, {1, -1, -1},
             {{{8}, {1, 1, 1, 3}, {}, {1, 0}, {9, 4, 5, -1}, {}},
              {{1, 2, 9, 4}, {0, 2, 2, 2}, {}, {0, 1}, {7, 8, -1, -1}, {}},
              {{5, 0}, {0, 0, 2, 2}, {}, {0, 0}, {0, 6, -1, -1}, {}}});
}

// Case R3: R=4 E=4 K=2 S=2 B=1 tp=1, s = [1, 2, 0, 2]. epn=1, NvS=4.
//  routing: rank 0 (3,3); rank 1 (3,0) (1,3); rank 2 none; rank 3 (3,2) (3,3).
//  N = [2,4,0,4], T = 10, CAP = 10 div 4 + (r < 2) = [3,3,2,2].
//  total = load = [1,1,1,7], balance = [-2,-2,-1,5]
//  step 2: 3 -> 0 moves 2 (deficit tie to the lowest rank) [0,-2,-1,3];
//          3 -> 1 moves 2 [0,0,-1,1]; 3 -> 2 moves 1; stop.
//  step 3 h=3: quotas [2,2,1]: alloc[0][3]=2, alloc[1][3]=2, alloc[2][3]=1,
//          alloc[3][3]=2.
//  step 4: ranks 0,1,2 copy e3 (remote_stats [1,0]); rank 3 copies nothing
//          and three copies are made of its expert: [0,3].
//  step 5 (5 groups): rank 0 g0 e0 [0,1), g4 e3 [1,3) -> cu [1,1,1,1,3];
//         rank 1 g1 e1 [0,1), g4 e3 [1,3) -> [0,1,1,1,3];
//         rank 2 g2 e2 [0,1), g4 e3 [1,2) -> [0,0,1,1,2];
//         rank 3 g3 e3 [0,2) -> [0,0,0,2,2].
//  step 6: acum e3 = [2,4,5,7]; cum[r-1][e3] = [0,2,4,4].
//   rank 0: i0 e3 G0 -> d0 1 | i1 e3 G1 -> d0 2
//   rank 1: i0 e3 G2 -> d1 1 = 5 | i1 e0 G0 -> d0 0 | i2 e1 G0 -> d1 0 = 4 |
//           i3 e3 G3 -> d1 2 = 6
//   rank 3: i0 e3 G4 -> d2 1 = 9 | i1 e2 G0 -> d2 0 = 8 | i2 e3 G5 -> d3 0 =
//           12 | i3 e3 G6 -> d3 1 = 13
//   src_info[0] = [5,0,1,-1], [1] = [6,4,7,-1], [2] = [13,12,-1,-1],
//   [3] = [14,15,-1,-1]
//  step 7: rank 0 (1,2) -> (1,-3); rank 1 (5,0) keep, (4,6) -> (4,-7);
//          rank 3 (9,8) -> (9,-9), (12,13) -> (12,-14).
//  step 8: rank 0 {1:[2]}, rank 1 {0:[2]}, rank 2 {1:[0]}, rank 3 {0:[1]}.
TEST_CASE("ragged case R3: T mod R = 2 puts one more on ranks 0 and 1") {
  const moonep::Config c{4, 4, 2, 2, 1, 1};
  const moonep::Routing routing = {{3, 3}, {3, 0, 1, 3}, {}, {3, 2, 3, 3}};
  check_ragged_plan(c, routing, {1, 2, 0, 2}, {3, 3, 3, -1},
             {{{1, -3}, {1, 1, 1, 1, 3}, {}, {1, 0}, {5, 0, 1, -1}, {{1, {2}}}},
              {{5, 0, 4, -7}, {0, 1, 1, 1, 3}, {}, {1, 0}, {6, 4, 7, -1}, {{0, {2}}}},
              {{}, {0, 0, 1, 1, 2}, {}, {1, 0}, {13, 12, -1, -1}, {{1, {0}}}},
              {{9, -9, 12, -14}, {0, 0, 0, 2, 2}, {}, {0, 3}, {14, 15, -1, -1}, {{0, {1}}}}});
}

// Case R4: R=2 E=2 K=2 S=3 B=1 tp=2, s = [0, 0]. NvS = round_up(6 + 2*1*1, 2)
//  = 8. T = 0, CAP = [0, 0]: nothing to move, every group empty, every slot
//  -1, no copies.
TEST_CASE("ragged case R4: an empty step") {
  const moonep::Config c{2, 2, 2, 3, 1, 2};
  const V none(8, -1);
  check_ragged_plan(c, moonep::Routing{{}, {}}, {0, 0}, {-1, -1},
             {{{}, {0, 0, 0}, {}, {0, 0}, none, {}}, {{}, {0, 0, 0}, {}, {0, 0}, none, {}}});
}

// The WGL search's inner loop (Wing & Gong with Lowe's memoisation), compiled.
//
// It is the same algorithm, step for step, as the pure-Python reference in
// checkers/wgl.py (same event order, same choices, same pruning), so both give the
// same verdict, linearization and longest prefix (with the same three extra rules, see
// checkers/wgl.py). One difference: visited
// (linearized set, state) pairs are kept as 128-bit fingerprints (two independent
// Zobrist hashes), not as n-bit sets, so an entry costs 16 bytes whatever n is; a
// wrong "already visited" needs a 128-bit collision. That is wgl_search; search, which
// the checker runs, adds the refutations below where a first share of its budget does
// not decide (so the two agree step for step on any history decided within that share).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "read_bound.hpp"

namespace llwgl {

enum : int8_t { READ = 0, WRITE = 1, CAS = 2, CAS_FAILED = 3 };
enum : int { OK = 0, FAIL = 1, OUT_OF_TIME = 2, OUT_OF_STATES = 3 };
// The checker's search (search, below) starts with a WGL search of at most this many
// memoised entries (or FIRST_TIER_PER_OP per operation, if more), and gives each
// window's search at least WINDOW_MIN_STATES, at most 1/WINDOW_SHARE of its tier; its
// smallest windows have WINDOW_OPS operations.
constexpr int64_t FIRST_TIER = 50000, FIRST_TIER_PER_OP = 20, WINDOW_MIN_STATES = 2000,
                  WINDOW_SHARE = 16;
constexpr int32_t WINDOW_OPS = 32;
// the first tier of search's memo for a history of n operations
static inline int64_t first_tier(int32_t n) {
    return std::max<int64_t>(FIRST_TIER, FIRST_TIER_PER_OP * (int64_t)n);
}

static inline uint64_t splitmix(uint64_t &x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Open addressing set of 128-bit fingerprints; (0, 0) marks an empty slot.
class FingerprintSet {
  public:
    // room for about `expected` entries before the first doubling (at least 64 slots)
    // (expected 0: the slots are allocated by the first insert, as a carried set that
    // is never given any needs none)
    explicit FingerprintSet(size_t expected) : mask_(63), size_(0) {
        while (mask_ + 1 < 2 * expected && mask_ < 1023) mask_ = 2 * mask_ + 1;
        if (expected) slots_.assign(2 * (mask_ + 1), 0);
    }
    // true when inserted (was absent)
    bool insert(uint64_t a, uint64_t b) {
        if (a == 0 && b == 0) a = 1;
        if (slots_.empty()) slots_.assign(2 * (mask_ + 1), 0);
        if ((size_ + 1) * 2 > mask_ + 1) grow();
        return place(slots_.data(), mask_, a, b);
    }
    size_t size() const { return size_; }
    bool contains(uint64_t a, uint64_t b) const {
        if (slots_.empty()) return false;
        if (a == 0 && b == 0) a = 1;
        for (uint64_t i = (a ^ (b >> 7)) & mask_;; i = (i + 1) & mask_) {
            const uint64_t *e = slots_.data() + 2 * i;
            if (e[0] == a && e[1] == b) return true;
            if (e[0] == 0 && e[1] == 0) return false;
        }
    }
    // removes (a, b) if present (backward-shift deletion: no tombstones)
    void erase(uint64_t a, uint64_t b) {
        if (slots_.empty()) return;
        if (a == 0 && b == 0) a = 1;
        uint64_t i = (a ^ (b >> 7)) & mask_;
        for (;; i = (i + 1) & mask_) {
            uint64_t *e = slots_.data() + 2 * i;
            if (e[0] == 0 && e[1] == 0) return;
            if (e[0] == a && e[1] == b) break;
        }
        --size_;
        for (uint64_t j = i;;) {  // i: the hole; pull back the entries it cut off
            j = (j + 1) & mask_;
            uint64_t *e = slots_.data() + 2 * j;
            if (e[0] == 0 && e[1] == 0) break;
            uint64_t home = (e[0] ^ (e[1] >> 7)) & mask_;
            // movable into the hole unless its home lies cyclically in (i, j]
            if (i <= j ? (i < home && home <= j) : (i < home || home <= j)) continue;
            slots_[2 * i] = e[0];
            slots_[2 * i + 1] = e[1];
            i = j;
        }
        slots_[2 * i] = slots_[2 * i + 1] = 0;
    }
    void swap(FingerprintSet &o) {
        slots_.swap(o.slots_);
        std::swap(mask_, o.mask_);
        std::swap(size_, o.size_);
    }
    // room for `expected` entries before the next doubling: one rehash where growing
    // there would double, rehashing every entry, once per step
    void reserve(size_t expected) {
        uint64_t cap = mask_ + 1;
        while (cap < 2 * expected) cap *= 2;
        if (cap > mask_ + 1 || slots_.empty()) resize(cap);
    }
    template <class F>
    void for_each(F f) const {
        if (slots_.empty()) return;
        for (uint64_t i = 0; i <= mask_; ++i)
            if (slots_[2 * i] != 0 || slots_[2 * i + 1] != 0) f(slots_[2 * i], slots_[2 * i + 1]);
    }

  private:
    bool place(uint64_t *s, uint64_t mask, uint64_t a, uint64_t b) {
        uint64_t i = (a ^ (b >> 7)) & mask;
        while (true) {
            uint64_t *e = s + 2 * i;
            if (e[0] == 0 && e[1] == 0) {
                e[0] = a;
                e[1] = b;
                ++size_;
                return true;
            }
            if (e[0] == a && e[1] == b) return false;
            i = (i + 1) & mask;
        }
    }
    void grow() { resize(2 * (mask_ + 1)); }
    void resize(uint64_t cap) {  // cap slots (a power of two), the entries rehashed
        std::vector<uint64_t> bigger(2 * cap, 0);
        size_ = 0;
        if (!slots_.empty()) {
            for (uint64_t i = 0; i <= mask_; ++i) {
                uint64_t a = slots_[2 * i], b = slots_[2 * i + 1];
                if (a != 0 || b != 0) place(bigger.data(), cap - 1, a, b);
            }
        }
        slots_.swap(bigger);
        mask_ = cap - 1;
    }
    std::vector<uint64_t> slots_;
    uint64_t mask_;
    size_t size_;
};

// Sorts a history's call or return events, (time, operation), as std::sort does (they
// are distinct): both are nearly sorted already (calls by invocation, returns but for
// the info operations', which never return and sit in operation order), so the info
// returns are moved to the end, and the rest is sorted by insertion while that moves
// few events (else by std::sort).
static void sort_events(std::vector<std::pair<int64_t, int32_t>> &v) {
    if (std::is_sorted(v.begin(), v.end())) return;
    auto last = std::stable_partition(v.begin(), v.end(),
                                      [](const auto &e) { return e.first != INT64_MAX; });
    const size_t k_end = last - v.begin();
    if (!std::is_sorted(last, v.end())) std::sort(last, v.end());  // in operation order
    size_t moves = 0, budget = 8 * k_end + 64;
    for (size_t k = 1; k < k_end; ++k) {
        auto x = v[k];
        size_t j = k;
        for (; j > 0 && x < v[j - 1]; --j) v[j] = v[j - 1];
        v[j] = x;
        moves += k - j;
        if (moves > budget) {
            std::sort(v.begin(), last);
            return;
        }
    }
}

struct SearchFrame {
    int32_t node;
    int32_t state;
    bool committed;
    bool dropped;  // the operation was dropped, not linearized
    uint64_t k1, k2;  // the memo entry of the state this step reached
};

// States a search proved dead, carried to later searches of the same history (same
// operations, same positions) at shifts no larger, read by wgl_search as already
// visited. Why that is sound, step by step, is wgl_search's "Carrying dead states".
// A search asks about each state new to it, and few are here: a bit per slot of a
// filter (at least FILTER_BITS per entry, so a few hundred KB where the table is MBs)
// answers most of them without the table's cache miss.
// A search gives its dead states only where there are at least MIN_GIVEN of them
// (fewer save less than the giving costs: a small key's search, linearizable at once,
// backtracks out of none or a few).
struct DeadStates {
    static constexpr uint64_t FILTER_BITS = 16;
    static constexpr size_t MIN_GIVEN = 64;
    FingerprintSet set{0};
    int32_t n = -1;    // the history's length (-1: no search has given any yet)
    int64_t hits = 0;  // entries a search found here and so did not memoise
    // at most this many entries (the memory of one search's memo): past it, the larger
    // of two sets is kept (any subset of dead states may be carried)
    int64_t cap = INT64_MAX;
    std::vector<uint64_t> filter;
    int shift = 64;  // a key's filter bit: the top bits of b * odd

    bool contains(uint64_t a, uint64_t b) const {
        if (filter.empty()) return false;
        uint64_t k = (b * 0x9E3779B97F4A7C15ULL) >> shift;
        return (filter[k >> 6] >> (k & 63) & 1) && set.contains(a, b);
    }
    // adds every entry of more (and then leaves it empty)
    void take(FingerprintSet &more) {
        bool whole = more.size() > set.size();
        if (whole) set.swap(more);  // the larger table takes the other's entries
        if ((int64_t)(set.size() + more.size()) <= cap) {
            more.for_each([&](uint64_t a, uint64_t b) {
                set.insert(a, b);
                if (!whole) mark(b);
            });
        }
        more = FingerprintSet(0);
        if (whole || set.size() * FILTER_BITS > 64 * filter.size()) {
            uint64_t bits = 4096;
            while (bits < set.size() * FILTER_BITS) bits *= 2;
            filter.assign(bits / 64, 0);
            shift = 64 - __builtin_ctzll(bits);
            set.for_each([&](uint64_t, uint64_t b) { mark(b); });
        }
    }

  private:
    void mark(uint64_t b) {
        if (filter.empty()) return;
        uint64_t k = (b * 0x9E3779B97F4A7C15ULL) >> shift;
        filter[k >> 6] |= 1ULL << (k & 63);
    }
};

// A search's buffers, kept per thread for the next search of at most REUSE_OPS
// operations (on a small key, allocating them was a tenth of the search); a longer
// history's search has its own, so that no thread keeps a large one.
constexpr int32_t REUSE_OPS = 4096;
struct SearchBuffers {
    std::vector<std::pair<int64_t, int32_t>> calls, rets;
    std::vector<int32_t> op_of, match, call_node, nxt1, prv1, nxt2, prv2, head_group,
        members, member_end, first_member, sig, ret_key, seen_min;
    std::vector<uint8_t> is_call;
    std::vector<std::pair<uint64_t, int32_t>> effects;
    std::vector<int64_t> seen_scan;
    std::vector<uint64_t> zobrist;  // operation i's keys at 2i, 2i + 1
    std::vector<SearchFrame> stack;
};

static SearchBuffers &search_buffers(int32_t n, SearchBuffers &own) {
    static thread_local SearchBuffers shared;
    return n <= REUSE_OPS ? shared : own;
}

// Is the history linearizable? ops are given as columns; start[i] is the (already
// shifted) invocation, end[i] the completion (INT64_MAX: outcome unknown); drop[i]
// (nullptr: none) marks an operation that may also never take effect: reached with
// its call pending, its return drops it (checkers/wgl.py, "Droppable operations").
// order receives the linearization (when OK), longest the longest linearized prefix;
// both must have room for n entries. *states is increased by the entries memoised;
// the search stops with OUT_OF_STATES when it would exceed max_states.
// Carrying dead states (checkers/wgl.py, which proves it sound): dead_in (nullptr:
// none) holds states earlier searches of this history proved dead at shifts no
// smaller than these (so does dead_in2); a step into one is a step into a visited
// state (not counted).
// On the way out the states this search proved dead (every entry memoised but those on
// the stack and the one memoised as the budget ran out) go to dead_out, when given and
// (only_if_ok) the history is linearizable; the caller passes it only where every later
// search reading it shifts each read by no more than this one.
// hint (0: none): about how many entries the caller expects this search to memoise
// (an earlier search of the same history's count); the memo starts with room for that
// many, at most max_states, instead of doubling its way there from a small table.
static int wgl_search(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
                      const int64_t *start, const int64_t *end, const uint8_t *drop,
                      int32_t init, int64_t max_states, double seconds, int64_t *states,
                      int32_t *order, int32_t *order_len, int32_t *longest,
                      int32_t *longest_len, DeadStates *dead_in = nullptr,
                      DeadStates *dead_out = nullptr, bool only_if_ok = true,
                      DeadStates *dead_in2 = nullptr, int64_t hint = 0) {
    *order_len = 0;
    *longest_len = 0;
    if (n == 0) return OK;
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(seconds));
    const int64_t UNKNOWN = INT64_MAX;
    const int32_t m = 2 * n;
    // The events in (time, call before return, operation) order: the calls sorted by
    // start and the returns by end (each usually sorted already, or nearly), then
    // merged, a call first where a return has the same time.
    SearchBuffers own;
    SearchBuffers &buf = search_buffers(n, own);
    auto &calls = buf.calls, &rets = buf.rets;
    calls.resize(n);
    rets.resize(n);
    for (int32_t i = 0; i < n; ++i) {
        calls[i] = {start[i], i};
        rets[i] = {end[i], i};
    }
    sort_events(calls);
    sort_events(rets);
    auto &op_of = buf.op_of, &match = buf.match, &call_node = buf.call_node;
    op_of.assign(m + 1, 0);
    match.assign(m + 1, 0);
    call_node.assign(n, 0);
    auto &is_call = buf.is_call;  // 1: a call, 2: an info operation's call
    is_call.assign(m + 1, 0);
    for (int32_t k = 0, c = 0, r = 0; k < m; ++k) {
        int32_t node = k + 1;
        if (c < n && (r == n || calls[c].first <= rets[r].first)) {
            int32_t i = calls[c++].second;
            op_of[node] = i;
            is_call[node] = end[i] == INT64_MAX ? 2 : 1;
            call_node[i] = node;
        } else {
            int32_t i = rets[r++].second;
            op_of[node] = i;
            match[call_node[i]] = node;
        }
    }
    // The pending events are kept in linked lists, in event order (nodes are numbered
    // in that order; node 0 heads each list). The first pass of a scan never tries an
    // info operation's call: it walks a list without them (nxt1/prv1: the other calls,
    // every return): with info operations piling up pending, walking past them was
    // much of a step's cost.
    auto &nxt1 = buf.nxt1, &prv1 = buf.prv1;
    nxt1.assign(m + 1, 0);
    prv1.assign(m + 1, 0);
    for (int32_t node = 0, last = 0; node <= m; ++node) {
        if (is_call[node] == 2) continue;
        if (node) {
            nxt1[last] = node;
            prv1[node] = last;
        }
        last = node;
        nxt1[node] = 0;
    }
    // Twins: state-changing operations with the same effect; of two twins that may go
    // now, one returning no later than the other goes first (info returns tie, then the
    // scan's order: call order).
    // (group numbers are labels only: sorting by effect numbers them)
    auto &sig = buf.sig, &ret_key = buf.ret_key;
    sig.assign(n, -1);
    ret_key.assign(n, 0);
    int32_t groups = 0;
    {
        // (kind, value, expected) packed in one key, in that order (codes are >= -1):
        // sorting pairs of integers is several times cheaper than sorting tuples
        auto &effects = buf.effects;
        effects.clear();
        for (int32_t i = 0; i < n; ++i) {
            ret_key[i] = end[i] == INT64_MAX ? m + 1 : match[call_node[i]];
            if (kind[i] != WRITE && kind[i] != CAS) continue;
            effects.emplace_back(
                ((uint64_t)kind[i] << 62) | ((uint64_t)(uint32_t)(val[i] + 1) << 31) |
                    (kind[i] == CAS ? (uint64_t)(uint32_t)(exp[i] + 1) : 0),
                i);
        }
        std::sort(effects.begin(), effects.end());
        for (size_t k = 0; k < effects.size(); ++k) {
            if (k > 0 && effects[k].first != effects[k - 1].first) ++groups;
            sig[effects[k].second] = groups;
        }
        if (!effects.empty()) ++groups;
    }
    // The second pass tries, of the info calls, only each twin group's earliest pending
    // one (the scan, below, says why): those alone are kept in a third list (nxt2/prv2,
    // in call order), so that a pass costs per group, not per pending info call (a
    // relaxation's clones of a few info writes are thousands). An info operation that
    // changes no state (a read, a failed compare) is a group of its own here. members
    // lists each group's info calls in call order, the pending ones from
    // first_member[g] to member_end[g].
    auto &nxt2 = buf.nxt2, &prv2 = buf.prv2, &head_group = buf.head_group,
         &members = buf.members, &member_end = buf.member_end,
         &first_member = buf.first_member;
    nxt2.assign(m + 1, 0);
    prv2.assign(m + 1, 0);
    head_group.assign(n, -1);
    int32_t head_groups = groups;
    for (int32_t node = 1; node <= m; ++node) {
        int32_t i = op_of[node];
        if (is_call[node] == 2) head_group[i] = sig[i] >= 0 ? sig[i] : head_groups++;
    }
    member_end.assign(head_groups, 0);
    for (int32_t node = 1; node <= m; ++node)
        if (is_call[node] == 2) ++member_end[head_group[op_of[node]]];
    for (int32_t g = 0, total = 0; g < head_groups; ++g) total = member_end[g] += total;
    members.resize(head_groups ? member_end[head_groups - 1] : 0);
    first_member = member_end;
    for (int32_t node = m; node >= 1; --node)
        if (is_call[node] == 2) members[--first_member[head_group[op_of[node]]]] = node;
    for (int32_t node = 1, last = 0; node <= m; ++node) {
        if (is_call[node] != 2 || members[first_member[head_group[op_of[node]]]] != node)
            continue;
        nxt2[last] = node;
        prv2[node] = last;
        last = node;
    }
    auto &seen_scan = buf.seen_scan;
    auto &seen_min = buf.seen_min;
    seen_scan.assign(groups, -1);
    seen_min.assign(groups, 0);
    int64_t scan = 0;
    auto passed = [&](int32_t node) {
        int32_t g = sig[op_of[node]];
        if (g < 0) return;
        int32_t k = ret_key[op_of[node]];
        if (seen_scan[g] != scan) {
            seen_scan[g] = scan;
            seen_min[g] = k;
        } else if (k < seen_min[g]) {
            seen_min[g] = k;
        }
    };
    // Zobrist keys: the same sequence for every search, so drawn once for the buffers
    auto &zobrist = buf.zobrist;
    if (zobrist.size() < 2 * (size_t)n) {
        uint64_t seed = 0x5EED1EA5E11E0000ULL;
        zobrist.resize(2 * (size_t)n);
        for (int32_t i = 0; i < n; ++i) {
            zobrist[2 * i] = splitmix(seed);
            zobrist[2 * i + 1] = splitmix(seed);
        }
    }
    const uint64_t *z = zobrist.data();
    // unlinks node from a list, keeping its own links: linking it back in undoes that
    // while every later change to the list has been undone (steps are undone last
    // first)
    auto out = [](std::vector<int32_t> &nx, std::vector<int32_t> &pv, int32_t node) {
        nx[pv[node]] = nx[node];
        if (nx[node]) pv[nx[node]] = pv[node];
    };
    auto in = [](std::vector<int32_t> &nx, std::vector<int32_t> &pv, int32_t node) {
        nx[pv[node]] = node;
        if (nx[node]) pv[nx[node]] = node;
    };
    // An info call is linearized only as its group's earliest pending one (the scan
    // tries no other) and taken back last first, so its group's pending info calls are
    // always the members from first_member on: the next one takes its place in nxt2
    // (after the earlier ones there), and gives it back.
    auto lift = [&](int32_t node) {
        int32_t r = match[node];
        if (is_call[node] == 2) {
            int32_t g = head_group[op_of[node]], p = prv2[node];
            out(nxt2, prv2, node);
            if (++first_member[g] < member_end[g]) {
                int32_t y = members[first_member[g]];
                while (nxt2[p] && nxt2[p] < y) p = nxt2[p];
                nxt2[y] = nxt2[p];
                prv2[y] = p;
                in(nxt2, prv2, y);
            }
        } else {
            out(nxt1, prv1, node);
        }
        out(nxt1, prv1, r);
    };
    auto unlift = [&](int32_t node) {
        int32_t r = match[node];
        in(nxt1, prv1, r);
        if (is_call[node] == 2) {
            int32_t g = head_group[op_of[node]];
            if (first_member[g] < member_end[g]) out(nxt2, prv2, members[first_member[g]]);
            --first_member[g];
            in(nxt2, prv2, node);
        } else {
            in(nxt1, prv1, node);
        }
    };
    using Frame = SearchFrame;
    auto &stack = buf.stack;
    stack.clear();
    stack.reserve(n);
    int32_t longest_valid = 0;  // stack[0:longest_valid] == longest[0:longest_valid]
    // (without a hint a small table: a small key's search memoises a few entries, and
    // zeroing a large table would be most of its cost)
    FingerprintSet cache(hint > 0 ? 0 : (size_t)n);
    if (hint > 0) cache.reserve((size_t)std::min(hint, max_states));
    // the entry memoised last but not stepped into (the budget ran out on it)
    uint64_t unexplored1 = 0, unexplored2 = 0;
    bool unexplored = false;
    int rc_out = FAIL;
    // on the way out (every return), the states proven dead go to dead_out: every
    // entry memoised but those on the stack and the one not stepped into
    struct Donate {
        std::function<void()> f;
        ~Donate() { f(); }
    } donate{[&] {
        if (!dead_out || (only_if_ok && rc_out != OK)) return;
        if (dead_out->n < 0) dead_out->n = n;
        if (cache.size() < stack.size() + unexplored + DeadStates::MIN_GIVEN) return;
        for (const Frame &fr : stack) cache.erase(fr.k1, fr.k2);
        if (unexplored) cache.erase(unexplored1, unexplored2);
        dead_out->take(cache);
    }};
    // a memo entry new to this search and to the states carried in (dead_in)
    // (memoised either way: a state carried in is dead here too, and revisits of it
    // then cost one look-up)
    auto fresh = [&](uint64_t a, uint64_t b) {
        if (!cache.insert(a, b)) return false;
        if (dead_in && dead_in->contains(a, b)) {
            ++dead_in->hits;
            return false;
        }
        if (dead_in2 && dead_in2->contains(a, b)) {
            ++dead_in2->hits;
            return false;
        }
        return true;
    };
    // counts a new memo entry; true when that exceeds max_states (the entry is then the
    // one not stepped into)
    auto over_budget = [&](uint64_t a, uint64_t b) {
        if (++*states <= max_states) return false;
        unexplored = true;
        unexplored1 = a;
        unexplored2 = b;
        return true;
    };
    int32_t state = init;
    bool after_info = false;  // is the last linearized operation an info one?
    uint64_t h1 = 0, h2 = 0;
    int32_t entry = nxt1[0];
    bool infos = false;  // in the scan's second pass, over the info operations? (a
                         // step tries the operations that return first, see wgl.py)
    int32_t stop = 0;  // in the second pass: the first pending return (the first pass's end)
    // The second pass tries (or passes as twins) the info calls in nxt2 before stop, in
    // call order, and then stops at stop, as a walk over every pending event before stop
    // did (it once did: a step's cost grew with the pending info calls, thousands where
    // a relaxation clones a few info writes). Why it tries the same calls in the same
    // order: that walk left the other calls to the first pass, and passed over (as a
    // twin) each info call of a group of which it had passed one in this scan, since an
    // info operation returns last (ret_key m + 1): any twin passed goes first. A group's
    // earliest pending info call precedes the others, so the walk reached it first,
    // then passed it (and so skipped the rest) or stepped (which ends the scan): it
    // tried only each group's earliest, in call order, as nxt2 lists them. An info
    // operation that changes no state is in no twin group, and alone in its nxt2 group.
    // Resuming after a step back (below) agrees too.
    auto next2 = [&](int32_t e) {  // the second pass's entry after e
        int32_t h = nxt2[e];
        return h && h < stop ? h : stop;
    };
    uint64_t iterations = 0;
    auto state_mix = [](int32_t s, uint64_t salt) {
        uint64_t x = (uint64_t)(uint32_t)s ^ salt;
        return splitmix(x);
    };
    auto legal = [&](int32_t s, int32_t i) {  // may op i (read / failed cas) run in s?
        return kind[i] == READ ? s == val[i] : s != exp[i];
    };
    // a step taken (memoised as n1, n2): onto the stack, then a fresh scan
    auto advance = [&](int32_t node, int32_t new_state, bool committed, bool dropped,
                       uint64_t n1, uint64_t n2, bool info_step, uint64_t k1, uint64_t k2) {
        stack.push_back(Frame{node, state, committed, dropped, k1, k2});
        state = new_state;
        h1 = n1;
        h2 = n2;
        after_info = info_step;
        lift(node);
        if ((int32_t)stack.size() > *longest_len) {
            for (size_t k = longest_valid; k < stack.size(); ++k)
                longest[k] = op_of[stack[k].node];
            *longest_len = (int32_t)stack.size();
            longest_valid = *longest_len;
        }
        entry = nxt1[0];
        infos = false;
        ++scan;
    };
    auto emit = [&](int rc) {
        rc_out = rc;
        if (rc == OK) {
            int32_t len = 0;
            for (size_t k = 0; k < stack.size(); ++k)
                if (!stack[k].dropped) order[len++] = op_of[stack[k].node];
            *order_len = len;
        }
        return rc;
    };
    while (true) {
        if ((++iterations & 0x3FFF) == 0 && std::chrono::steady_clock::now() > deadline)
            return emit(OUT_OF_TIME);
        if (entry && is_call[entry]) {
            int32_t i = op_of[entry];
            int32_t g = sig[i];
            int8_t f = kind[i];
            bool dead = false, skip = false;
            if (g >= 0 && seen_scan[g] == scan && seen_min[g] <= ret_key[i])
                skip = true;  // a twin passed in this scan goes first
            else if (after_info && f == WRITE)
                skip = true;  // an info operation right before a write is overwritten unseen
            else if (after_info && (f == READ || f == CAS_FAILED) &&
                     legal(stack.back().state, i))
                skip = true;  // legal before the info operation too: it goes there
            if (skip) {
                passed(entry);
                entry = infos ? next2(entry) : nxt1[entry];
                continue;
            }
            bool ok;
            int32_t new_state = state;
            if (f == READ) {
                ok = state == val[i];
            } else if (f == WRITE) {
                ok = true;
                new_state = val[i];
            } else if (f == CAS) {
                ok = state == exp[i];
                if (ok) new_state = val[i];
            } else {
                ok = state != exp[i];
            }
            bool passive = f == READ || f == CAS_FAILED;
            if (ok) {
                uint64_t n1 = h1 ^ z[2 * i], n2 = h2 ^ z[2 * i + 1];
                bool info_i = end[i] == UNKNOWN;
                // after an info operation the next step depends on the state before it
                uint64_t salt = info_i ? state_mix(state, 0x9E3779B97F4A7C15ULL) : 0;
                uint64_t k1 = n1 ^ state_mix(new_state, 0x1234567ULL ^ salt),
                         k2 = n2 ^ state_mix(new_state, 0xABCDEF01ULL ^ salt);
                if (fresh(k1, k2)) {
                    if (over_budget(k1, k2)) return emit(OUT_OF_STATES);
                    advance(entry, new_state, passive, false, n1, n2, info_i, k1, k2);
                    continue;
                }
                dead = passive;
            }
            if (!dead) {
                passed(entry);
                entry = infos ? next2(entry) : nxt1[entry];
                continue;
            }
        } else if (!infos) {
            if (!entry || end[op_of[entry]] == UNKNOWN)
                return emit(OK);  // only info operations remain pending: leave them out
            // the first pass (over nxt1) passed an info call iff one pending precedes (the
            // earliest is its group's earliest: nxt2's first)
            if (nxt2[0] && nxt2[0] < entry) {  // the first return event: the second pass
                infos = true;
                stop = entry;
                entry = nxt2[0];
                continue;
            }
        }
        if (entry && !is_call[entry] && drop && drop[op_of[entry]]) {
            // a droppable operation's return with its call pending: it never took
            // effect, the one way on from here (committed, as a forced step)
            int32_t i = op_of[entry], call = call_node[i];
            uint64_t n1 = h1 ^ z[2 * i], n2 = h2 ^ z[2 * i + 1];
            uint64_t k1 = n1 ^ state_mix(state, 0x1234567ULL),
                     k2 = n2 ^ state_mix(state, 0xABCDEF01ULL);
            if (fresh(k1, k2)) {
                if (over_budget(k1, k2)) return emit(OUT_OF_STATES);
                advance(call, state, true, true, n1, n2, false, k1, k2);
                continue;
            }
        }
        // a return event whose call is pending (or a dead end): backtrack
        int32_t node;
        while (true) {
            if (stack.empty()) return emit(FAIL);
            Frame fr = stack.back();
            stack.pop_back();
            if ((int32_t)stack.size() < longest_valid) longest_valid = (int32_t)stack.size();
            node = fr.node;
            state = fr.state;
            int32_t i = op_of[node];
            h1 ^= z[2 * i];
            h2 ^= z[2 * i + 1];
            unlift(node);
            if (!fr.committed) break;
        }
        after_info = !stack.empty() && end[op_of[stack.back().node]] == UNKNOWN;
        // resume the scan that chose `node`, past it: record what it had passed (in the
        // second pass, the whole first pass too)
        ++scan;
        infos = is_call[node] == 2;
        if (infos) {
            for (stop = nxt1[0]; is_call[stop]; stop = nxt1[stop]) passed(stop);
            // node is its group's earliest pending info call again: passing each group's
            // earliest up to node marks the groups the walk marked passing every pending
            // info call up to node (the others tie at ret_key m + 1: no change)
            for (int32_t e = nxt2[0];; e = nxt2[e]) {
                passed(e);
                if (e == node) break;
            }
            entry = next2(node);
        } else {  // the first pass
            for (int32_t e = nxt1[0];; e = nxt1[e]) {
                passed(e);
                if (e == node) break;
            }
            entry = nxt1[node];
        }
    }
}


// Refuting by windows (checkers/wgl.py, "Overwritten reads and windows"): a window [a,
// b] of the history keeps the operations invoked in it, with those invoked before a
// that complete at a or later (spanning a) made droppable, and those still running at b
// cut as at b (a write or compare becomes an info operation, a read or failed compare
// goes); the operations that completed before a are gone, so the window may start in
// any state. If no start state makes a window linearizable, neither is the history.
// Windows of `smallest` (at least 2), twice as many, ... operations (by invocation),
// each overlapping the next by half, are tried in turn; a window's search may memoise
// at most `per_window` entries (more: the window tells nothing), all of them `budget`
// in all. FAIL: a window has no linearization (its operations in *window_ops when
// given); OUT_OF_STATES: none was found within the budget; OUT_OF_TIME.
template <class Clock>
static int refute(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
                  const int64_t *start, const int64_t *end, const uint8_t *drop,
                  int32_t smallest, int64_t budget, int64_t per_window,
                  typename Clock::time_point deadline, int64_t *states,
                  std::vector<int32_t> *window_ops) {
    const int64_t UNKNOWN = INT64_MAX;
    std::vector<int32_t> by_start(n), infos;
    for (int32_t i = 0; i < n; ++i) by_start[i] = i;
    std::stable_sort(by_start.begin(), by_start.end(),
                     [&](int32_t x, int32_t y) { return start[x] < start[y]; });
    int64_t longest_call = 0;  // of the operations that complete
    for (int32_t k = 0; k < n; ++k) {
        int32_t i = by_start[k];
        if (end[i] == UNKNOWN)
            infos.push_back(i);
        else
            longest_call = std::max(longest_call, end[i] - start[i]);
    }
    std::vector<int32_t> sub;
    std::vector<int8_t> k2;
    std::vector<int32_t> v2, e2, order(n), longest(n);
    std::vector<int64_t> s2, t2;
    std::vector<uint8_t> d2;
    std::vector<uint8_t> seen;
    std::vector<int32_t> inits;
    for (int32_t size = std::max(2, smallest); size < n; size *= 2) {
        for (int32_t lo = 0; lo < n; lo += size / 2) {
            if (Clock::now() > deadline) return OUT_OF_TIME;
            int32_t hi = std::min(n, lo + size);
            int64_t a = start[by_start[lo]];
            int64_t b = hi < n ? start[by_start[hi]] - 1 : UNKNOWN - 1;
            if (b < a) continue;  // ties at both ends: an empty window
            sub.clear();
            int32_t first = lo;  // the first invoked at a (ties before lo too)
            while (first > 0 && start[by_start[first - 1]] == a) --first;
            // spanning a: invoked before it, completing at a or later
            int32_t back = first;
            while (back > 0 && start[by_start[back - 1]] >= a - longest_call) --back;
            for (int32_t k = back; k < first; ++k) {
                int32_t i = by_start[k];
                if (start[i] < a && end[i] != UNKNOWN && end[i] >= a) sub.push_back(i);
            }
            for (int32_t i : infos) {
                if (start[i] >= a) break;
                sub.push_back(i);
            }
            for (int32_t k = first; k < n && start[by_start[k]] <= b; ++k)
                sub.push_back(by_start[k]);
            k2.clear(); v2.clear(); e2.clear(); s2.clear(); t2.clear(); d2.clear();
            for (int32_t i : sub) {
                bool cut = end[i] > b;  // still running at b (or info)
                if (cut && (kind[i] == READ || kind[i] == CAS_FAILED)) continue;
                k2.push_back(kind[i]);
                v2.push_back(val[i]);
                e2.push_back(exp[i]);
                s2.push_back(start[i]);
                t2.push_back(cut ? UNKNOWN : end[i]);
                d2.push_back(start[i] < a || (drop && drop[i]));
            }
            int32_t m = (int32_t)k2.size();
            if (m == 0) continue;
            // the start states worth telling apart: each value observed in the window,
            // and one that none observes (-1: no read or compare has it)
            inits.assign(1, -1);
            int32_t top = 0;
            for (int32_t j = 0; j < m; ++j) top = std::max({top, v2[j] + 1, e2[j] + 1});
            seen.assign(top, 0);
            for (int32_t j = 0; j < m; ++j) {
                int32_t c = k2[j] == READ ? v2[j] : k2[j] == WRITE ? -1 : e2[j];
                if (c >= 0 && !seen[c]) {
                    seen[c] = 1;
                    inits.push_back(c);
                }
            }
            bool refuted = true;
            for (int32_t s0 : inits) {
                int64_t room = std::min(per_window, budget - *states);
                if (room <= 0) return OUT_OF_STATES;
                double left = std::chrono::duration<double>(deadline - Clock::now()).count();
                int64_t used = 0;
                int32_t ol = 0, ll = 0;
                int rc = wgl_search(m, k2.data(), v2.data(), e2.data(), s2.data(), t2.data(),
                                    d2.data(), s0, room, std::max(0.0, left), &used,
                                    order.data(), &ol, longest.data(), &ll);
                *states += used;
                if (rc == OUT_OF_TIME) return OUT_OF_TIME;
                if (rc != FAIL) {  // linearizable from s0, or undecided: no proof here
                    refuted = false;
                    break;
                }
            }
            if (refuted) {
                if (window_ops) {
                    window_ops->clear();
                    for (int32_t i : sub)
                        if (!(end[i] > b && (kind[i] == READ || kind[i] == CAS_FAILED)))
                            window_ops->push_back(i);
                }
                return FAIL;
            }
        }
    }
    return OUT_OF_STATES;
}

// refute, timed by the steady clock, for `seconds`.
static int refute_for(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
                      const int64_t *start, const int64_t *end, const uint8_t *drop,
                      int32_t smallest, int64_t budget, int64_t per_window, double seconds,
                      int64_t *states, std::vector<int32_t> *window_ops) {
    using clock = std::chrono::steady_clock;
    auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                       std::chrono::duration<double>(seconds));
    return refute<clock>(n, kind, val, exp, start, end, drop, smallest, budget, per_window,
                         deadline, states, window_ops);
}

// A read no linearization can place (checkers/wgl.py, "Overwritten reads and windows"):
// one of value v such that some acknowledged operation y that surely takes effect and
// leaves a value other than v completed before the read's (shifted) invocation, after
// every operation that may write v and may go before the read had completed (an info
// write never has). Whatever wrote the v the read returned precedes y, which precedes
// the read: it cannot be the last write before it. Returns such a read's position, or
// -1.
static int32_t overwritten_read(int32_t n, const int8_t *kind, const int32_t *val,
                                const int64_t *start, const int64_t *end, const uint8_t *drop) {
    const int64_t UNKNOWN = INT64_MAX, NONE = INT64_MIN;
    std::vector<int32_t> ys, reads;
    int32_t codes = 0;
    for (int32_t i = 0; i < n; ++i) {
        bool writes = kind[i] == WRITE || kind[i] == CAS;
        if (writes && end[i] != UNKNOWN && !(drop && drop[i])) ys.push_back(i);
        if (kind[i] == READ && end[i] != UNKNOWN && !(drop && drop[i])) reads.push_back(i);
        if (writes || kind[i] == READ) codes = std::max(codes, val[i] + 1);
    }
    if (ys.empty() || reads.empty()) return -1;
    // the writers of each value by invocation, with the latest completion so far
    std::vector<int32_t> at(codes + 1, 0);
    for (int32_t i = 0; i < n; ++i)
        if ((kind[i] == WRITE || kind[i] == CAS) && val[i] >= 0) ++at[val[i] + 1];
    for (int32_t c = 0; c < codes; ++c) at[c + 1] += at[c];
    std::vector<std::pair<int64_t, int64_t>> writers(at[codes]);  // (start, latest end)
    {
        std::vector<int32_t> fill(at.begin(), at.end() - 1);
        for (int32_t i = 0; i < n; ++i)
            if ((kind[i] == WRITE || kind[i] == CAS) && val[i] >= 0)
                writers[fill[val[i]]++] = {start[i], end[i]};
        for (int32_t c = 0; c < codes; ++c) {
            auto b = writers.begin() + at[c], e = writers.begin() + at[c + 1];
            std::sort(b, e);
            for (auto p = b; p != e; ++p)
                if (p != b) p->second = std::max(p->second, (p - 1)->second);
        }
    }
    std::sort(ys.begin(), ys.end(), [&](int32_t x, int32_t y) { return end[x] < end[y]; });
    std::sort(reads.begin(), reads.end(),
              [&](int32_t x, int32_t y) { return start[x] < start[y]; });
    // the latest-invoked overwrite completed so far, and the latest of another value
    int64_t s1 = NONE, s2 = NONE;
    int32_t v1 = INT32_MIN;
    size_t k = 0;
    for (int32_t r : reads) {
        for (; k < ys.size() && end[ys[k]] < start[r]; ++k) {
            int32_t y = ys[k];
            if (start[y] > s1) {
                if (val[y] != v1) s2 = s1;
                s1 = start[y];
                v1 = val[y];
            } else if (val[y] != v1 && start[y] > s2) {
                s2 = start[y];
            }
        }
        int32_t v = val[r];
        int64_t t = v1 != v ? s1 : s2;  // the latest overwrite of v before the read
        if (t == NONE) continue;
        int64_t last = NONE;  // the latest completion of a write of v that may go first
        if (v >= 0 && v < codes) {
            auto b = writers.begin() + at[v], e = writers.begin() + at[v + 1];
            auto p = std::upper_bound(b, e, std::make_pair(end[r], INT64_MAX));
            if (p != b) last = (p - 1)->second;
        }
        if (last < t) return r;
    }
    return -1;
}

// The search as the checker runs it: WGL first, with a small memo (most linearizable
// histories need little); where that runs out, an overwritten read, then windows try to
// refute the history (with as much work), then WGL again with eight times the memo, and
// so on, all within max_states memoised entries in all (each full search's memo is its
// own). A history whose violation lies in a few operations is refuted without the
// search of everything before them (checkers/wgl.py, "Overwritten reads and windows").
// A refuted history's longest prefix is the last full search's. Each full search reads
// dead_in and dead_in2 (the windows' are other histories: none), and the one that
// finds the history linearizable gives its dead states to dead_ok (wgl_search's
// dead_out). hint: wgl_search's, for the first full search; each later one repeats the
// one before it until that one's room ran out, so it expects at least as many.
static int search(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
                  const int64_t *start, const int64_t *end, const uint8_t *drop, int32_t init,
                  int64_t max_states, double seconds, int64_t *states, int32_t *order,
                  int32_t *order_len, int32_t *longest, int32_t *longest_len,
                  DeadStates *dead_in = nullptr, DeadStates *dead_ok = nullptr,
                  DeadStates *dead_in2 = nullptr, int64_t hint = 0) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                             std::chrono::duration<double>(seconds));
    auto left = [&] {
        return std::max(0.0, std::chrono::duration<double>(deadline - clock::now()).count());
    };
    const int64_t first = first_tier(n);
    int64_t tier = first;
    int64_t spent = 0;
    while (true) {
        int64_t room = std::min(tier, max_states - spent);
        int64_t used = 0;
        int rc = wgl_search(n, kind, val, exp, start, end, drop, init, room, left(), &used,
                            order, order_len, longest, longest_len, dead_in, dead_ok, true,
                            dead_in2, hint);
        spent += used;
        *states += used;
        if (rc != OUT_OF_STATES || spent >= max_states) return rc;
        hint = std::max(hint, used);
        if (tier == first && overwritten_read(n, kind, val, start, end, drop) >= 0) {
            *order_len = 0;
            return FAIL;
        }
        used = 0;
        rc = refute<clock>(n, kind, val, exp, start, end, drop, WINDOW_OPS,
                           std::min(tier, max_states - spent),
                           std::max<int64_t>(WINDOW_MIN_STATES, tier / WINDOW_SHARE),
                           deadline, &used, nullptr);
        spent += used;
        *states += used;
        if (rc == FAIL || rc == OUT_OF_TIME) {
            *order_len = 0;
            return rc;
        }
        if (spent >= max_states) return OUT_OF_STATES;
        tier *= 8;
    }
}

// The values read.invoke - completion (> 0) at which the shifted real-time order
// changes, queried without listing them all (checkers/wgl.py, _Candidates).
class Candidates {
  public:
    Candidates(int32_t n, const int8_t *kind, const int64_t *invoke, const int64_t *end) {
        for (int32_t i = 0; i < n; ++i) {
            if (kind[i] == READ) reads_.push_back(invoke[i]);
            if (end[i] != INT64_MAX) comps_.push_back(end[i]);
        }
        std::sort(comps_.begin(), comps_.end());
    }
    int64_t top() const {
        if (reads_.empty() || comps_.empty()) return 0;
        return std::max<int64_t>(0, *std::max_element(reads_.begin(), reads_.end()) - comps_[0]);
    }
    // how many candidates lie in (lo, hi) (repeats counted)
    int64_t count(int64_t lo, int64_t hi) const {
        int64_t total = 0;
        for (int64_t r : reads_) total += span(r, lo, hi).second;
        return total;
    }
    // the largest candidate < d (0 if none)
    int64_t below(int64_t d) const {
        int64_t best = 0;
        for (int64_t r : reads_) {
            auto k = std::upper_bound(comps_.begin(), comps_.end(), r - d);
            if (k != comps_.end()) best = std::max(best, r - *k);
        }
        return best;
    }
    // the least candidate >= max(d, 1) (0 if none)
    int64_t at_least(int64_t d) const {
        d = std::max<int64_t>(d, 1);
        int64_t best = INT64_MAX;
        for (int64_t r : reads_) {
            auto k = std::upper_bound(comps_.begin(), comps_.end(), r - d);
            if (k != comps_.begin()) best = std::min(best, r - *(k - 1));
        }
        return best == INT64_MAX ? 0 : best;
    }
    // candidates in (lo, hi), sorted: all (repeats kept), or every k-th where there
    // are more than `most`; returns whether that is all of them
    bool between(int64_t lo, int64_t hi, int64_t most, std::vector<int64_t> &out) const {
        size_t nr = reads_.size();
        std::vector<int64_t> a(nr), count(nr), ends(nr);
        int64_t total = 0;
        for (size_t r = 0; r < nr; ++r) {
            std::tie(a[r], count[r]) = span(reads_[r], lo, hi);
            total += count[r];
            ends[r] = total;
        }
        int64_t stride = std::max<int64_t>(1, (total + most - 1) / most);
        out.clear();
        size_t r = 0;
        for (int64_t rank = 0; rank < total; rank += stride) {
            while (ends[r] <= rank) ++r;
            out.push_back(reads_[r] - comps_[a[r] + rank - (ends[r] - count[r])]);
        }
        std::sort(out.begin(), out.end());
        return total <= most;
    }

  private:
    // (a, count): read r's candidates in (lo, hi) are r - comps_[a .. a + count)
    std::pair<int64_t, int64_t> span(int64_t r, int64_t lo, int64_t hi) const {
        int64_t a = std::upper_bound(comps_.begin(), comps_.end(), r - hi) - comps_.begin();
        int64_t b = std::lower_bound(comps_.begin(), comps_.end(), r - lo) - comps_.begin();
        return {a, std::max<int64_t>(b - a, 0)};
    }
    std::vector<int64_t> reads_, comps_;
};

static inline int64_t bit_length(int64_t x) {  // as Python's int.bit_length
    return x <= 0 ? 0 : 64 - __builtin_clzll((uint64_t)x);
}

// The largest shift a read needs in a linearization: how far its invoke is after the
// earliest completion linearized after it (checkers/wgl.py, _Moves).
static int64_t largest_move(const int8_t *kind, const int64_t *invoke, const int64_t *end,
                            const std::vector<int32_t> &order) {
    int64_t later = INT64_MAX, best = 0;
    for (size_t k = order.size(); k-- > 0;) {
        int32_t i = order[k];
        if (kind[i] == READ && later < invoke[i]) best = std::max(best, invoke[i] - later);
        later = std::min(later, end[i]);
    }
    return best;
}

// checkers/wgl.py's compact, over the value codes: each read moved as late as it may
// go (to after the last later operation leaving the state at its value, passing only
// operations invoked no later than it completed). order is left as it is if it is not
// a linearization.
static void compact(const int8_t *kind, const int32_t *val, const int32_t *exp,
                    const int64_t *invoke, const int64_t *end, int32_t init,
                    std::vector<int32_t> &order) {
    std::vector<int32_t> states(order.size());  // the state after each operation
    int32_t state = init;
    for (size_t k = 0; k < order.size(); ++k) {
        int32_t i = order[k];
        switch (kind[i]) {
            case READ:
                if (state != val[i]) return;
                break;
            case WRITE:
                state = val[i];
                break;
            case CAS:
                if (state != exp[i]) return;
                state = val[i];
                break;
            default:
                if (state == exp[i]) return;
        }
        states[k] = state;
    }
    for (size_t p = order.size(); p-- > 0;) {
        int32_t r = order[p];
        if (kind[r] != READ) continue;
        int32_t value = states[p];
        size_t last = p;
        for (size_t j = p + 1; j < order.size() && invoke[order[j]] <= end[r]; ++j)
            if (states[j] == value) last = j;
        if (last > p) {
            std::move(order.begin() + p + 1, order.begin() + last + 1, order.begin() + p);
            order[last] = r;
            std::move(states.begin() + p + 1, states.begin() + last + 1, states.begin() + p);
            states[last] = value;
        }
    }
}

struct DeltaOut {
    int64_t delta = -1;      // -1: no shift helps
    bool exact = true;       // false: the budget ran out refining; delta is an upper bound
    int64_t failed_at = -1;  // a shift at which the history fails (-1: none)
    int64_t verdict_states = 0;
    std::vector<int32_t> order, longest;
    int64_t pass_states = 0;  // the passing passes' mean memoised entries (0: none passed)
};

// The minimal Δ, as checkers/wgl.py's min_delta (which documents it), step for step:
// the same passes in the same order. Returns OK when the verdict is decided (out says
// whether refining ran out), else OUT_OF_TIME / OUT_OF_STATES. max_states caps each
// search's memo; max_work (-1: none) the sum over searches, *states receives that sum.
// zero_states >= 0: the caller's search of this history at Δ = 0 failed, memoising that
// many entries, with longest prefix *zero_longest; where that search was one WGL
// search alone (fewer entries than search's first tier) and within this pass's room,
// the pass at 0 would repeat it step for step (a search that never reaches its room
// does the same whatever the room), so it is taken as made, entries counted, instead.
static int min_delta(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
                     const int64_t *invoke, const int64_t *end, const uint8_t *drop,
                     int32_t init, int64_t lease,
                     int64_t max_states, int64_t max_work, double seconds,
                     double cheap_failure, int64_t list_candidates, int32_t walk_before_gallop,
                     bool floor_first, int64_t *states, DeltaOut &out,
                     DeadStates *carry = nullptr, int64_t zero_states = -1,
                     const std::vector<int32_t> *zero_longest = nullptr) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::duration_cast<clock::duration>(
                                             std::chrono::duration<double>(seconds));
    *states = 0;
    std::vector<int64_t> start(n);
    std::vector<int32_t> got_order, got_longest;  // the last pass's
    int64_t fail_states = 0, ok_sum = 0, ok_count = 0;
    int rc = OK;  // the last pass's
    auto ok_mean = [&] { return ok_count ? ok_sum / ok_count : 0; };  // passing passes'
    // on every way out, what the passing passes memoised on average (out.pass_states)
    struct PassStates {
        std::function<void()> f;
        ~PassStates() { f(); }
    } pass_states{[&] { out.pass_states = ok_mean(); }};
    // one search with every read's invoke d earlier; false: the budget ran out (rc).
    // Each reads the states the passing ones before it proved dead, and a passing one
    // adds its own (carry): every pass after a passing one is at a smaller Δ (the
    // verdict's passes stop at the first that passes; the loop's lie in (lo, hi), hi
    // at most every Δ passed), so those states are dead at it (checkers/wgl.py,
    // "Carrying dead states"); failing passes give none, as later ones may lie above,
    // nor does the pass at 0 (passing, it is the last search: Δ = 0 has no stale read).
    auto room_left = [&] {  // the next pass's room: its cap and what the work leaves
        int64_t room = max_states;
        if (max_work >= 0) room = std::max<int64_t>(0, std::min(room, max_work - *states));
        return room;
    };
    auto pass = [&](int64_t d) {
        for (int32_t i = 0; i < n; ++i) start[i] = invoke[i] - (kind[i] == READ ? d : 0);
        int64_t room = room_left();
        double left = std::chrono::duration<double>(deadline - clock::now()).count();
        int64_t used = 0;
        int32_t order_len = 0, longest_len = 0;
        got_order.resize(std::max(n, 1));
        got_longest.resize(std::max(n, 1));
        // the memo's size hint: at 0 the caller's search there (the same search), else
        // the passing passes' mean (a pass at a nearby Δ memoises about as many; a failing
        // one's count says little: the pass at 0 may run out of its tier where the passing
        // ones need a small part of it)
        int64_t hint = d == 0 ? std::max<int64_t>(zero_states, 0) : ok_mean();
        rc = search(n, kind, val, exp, start.data(), end, drop, init, room,
                    std::max(0.0, left), &used, got_order.data(), &order_len,
                    got_longest.data(), &longest_len, carry, d > 0 ? carry : nullptr, nullptr,
                    hint);
        got_order.resize(order_len);
        got_longest.resize(longest_len);
        *states += used;
        if (rc == OK) {
            ok_sum += used;
            ++ok_count;
        } else if (rc == FAIL) {
            fail_states = std::max(fail_states, used);
        }
        return rc == OK || rc == FAIL;
    };
    // the verdict: Δ = 0, then L, then the largest Δ that changes anything
    if (zero_states >= 0 && zero_longest != nullptr &&
        zero_states < std::min(room_left(), first_tier(n))) {
        *states += zero_states;  // the caller's failing pass at 0, as pass(0) makes it
        fail_states = zero_states;
        rc = FAIL;
        got_order.clear();
        got_longest = *zero_longest;
    } else if (!pass(0)) {
        return rc;
    }
    if (rc == OK) {
        out = DeltaOut{0, true, -1, *states, got_order, {}};
        return OK;
    }
    Candidates cands(n, kind, invoke, end);
    int64_t top = cands.top();
    if (top == 0) {
        out = DeltaOut{-1, true, 0, *states, {}, got_longest};
        return OK;
    }
    int64_t lo = 0;  // not linearizable at lo
    std::vector<int32_t> failed_longest = got_longest, hi_order;
    bool have_hi = false;
    // read_bound's floor: linearizable at no Δ below it, so at no candidate below the
    // least candidate from it up, at_floor; passing there, Δ is exactly that
    int64_t at_floor = 0;
    if (floor_first) {
        int64_t floor = refuted_below(n, kind, val, exp, invoke, end, drop, init);
        if (floor >= bound::ALWAYS) {  // no Δ helps
            out = DeltaOut{-1, true, top, *states, {}, got_longest};
            return OK;
        }
        if (floor > 0) at_floor = cands.at_least(floor);
    }
    if (0 < at_floor && at_floor <= top) {
        lo = cands.below(at_floor);
        if (pass(at_floor)) {
            if (rc == OK) {
                compact(kind, val, exp, invoke, end, init, got_order);
                out = DeltaOut{largest_move(kind, invoke, end, got_order), true, lo, *states,
                               got_order, failed_longest};
                return OK;
            }
            lo = at_floor;
            failed_longest = got_longest;
        }  // (out of budget: on as without the floor, lo still shown failing)
        if (lo == top) {
            out = DeltaOut{-1, true, top, *states, {}, failed_longest};
            return OK;
        }
    }
    if (lo < lease && lease < top && lease >= at_floor) {
        if (!pass(lease)) return rc;
        if (rc == OK) {
            have_hi = true;
            hi_order = got_order;
        } else {
            lo = lease;
            failed_longest = got_longest;
        }
    }
    if (!have_hi) {
        if (!pass(top)) return rc;
        if (rc != OK) {
            out = DeltaOut{-1, true, top, *states, {}, got_longest};
            return OK;
        }
        hi_order = got_order;
    }
    int64_t verdict_states = *states;
    compact(kind, val, exp, invoke, end, init, hi_order);
    int64_t hi = largest_move(kind, invoke, end, hi_order);
    std::vector<int64_t> listed;  // (a sample of) the candidates in (lo, hi)
    bool complete = false;        // listed has every candidate in (lo, hi)
    int64_t walked = 0, walk_progress = 0;  // the walk's linearizable passes, their progress
    int64_t gap = 0;                        // the gallop's stride below hi
    bool bracketed = false;                 // the gallop has failed once: bisect instead
    bool exact = true;
    enum { BISECT, WALK, GALLOP };
    while (true) {
        double avg_ok = (double)ok_sum / (double)ok_count;
        int step;
        if ((double)fail_states <= cheap_failure * avg_ok) {
            step = BISECT;
        } else if (walked < walk_before_gallop ||
                   (double)(hi - lo) / ((double)walk_progress / (double)walked) * avg_ok <=
                       (double)bit_length(cands.count(lo, hi)) * (double)fail_states) {
            step = WALK;  // walking the rest looks cheaper than failing passes
        } else {
            step = bracketed ? BISECT : GALLOP;
        }
        int64_t d;
        if (step == BISECT) {  // by the ranks of (a sample of) the candidates in (lo, hi)
            size_t a = std::upper_bound(listed.begin(), listed.end(), lo) - listed.begin();
            size_t b = std::lower_bound(listed.begin(), listed.end(), hi) - listed.begin();
            if (a >= b) {
                if (complete) break;  // no candidate in (lo, hi): hi is exact
                complete = cands.between(lo, hi, list_candidates, listed);
                a = 0;
                b = listed.size();
                if (b == 0) break;
            }
            d = listed[(a + b) / 2];
        } else {  // the candidate just below hi, or gap below it
            d = cands.below(step == WALK ? hi : hi - gap);
            if (d <= lo) {
                if (step == WALK) break;  // no candidate in (lo, hi): hi is exact
                bracketed = true;         // the stride passed lo
                continue;
            }
        }
        if (!pass(d)) {
            exact = false;  // the budget ran out: hi is an upper bound
            break;
        }
        if (rc != OK) {
            lo = d;
            failed_longest = got_longest;
            if (step == WALK) break;  // d was the candidate just below hi: hi is exact
            bracketed = bracketed || step == GALLOP;
            continue;
        }
        compact(kind, val, exp, invoke, end, init, got_order);
        int64_t need = largest_move(kind, invoke, end, got_order);
        if (step == WALK) {
            ++walked;
            walk_progress += hi - need;
        } else if (step == GALLOP) {
            gap = std::max(2 * gap, hi - need);
        }
        hi = need;
        hi_order = got_order;
    }
    out = DeltaOut{hi, exact, lo, verdict_states, hi_order, failed_longest};
    return OK;
}

}  // namespace llwgl

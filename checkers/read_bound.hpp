// read_bound's thresholds, compiled: checkers/read_bound.py's _thresholds (which
// derives them) step for step over the search's columns, so the same floor and the same
// reads shown stale. In numpy they cost a few hundred microseconds a key, more than the
// searches a floor spares on a small one; here about a microsecond per read.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace llwgl {

namespace bound {

constexpr int64_t NONE = -(int64_t(1) << 61);   // no time (read_bound.NONE)
constexpr int64_t ALWAYS = int64_t(1) << 61;    // no Δ helps (read_bound.ALWAYS)
constexpr int32_t WINDOW = 32;                  // read_bound.WINDOW
// the operation kinds (checkers/ops.py; wgl_core.hpp, which includes this, names them too)
constexpr int8_t READ = 0, WRITE = 1, CAS = 2, CAS_FAILED = 3;
constexpr int64_t UNKNOWN_END = INT64_MAX;

}  // namespace bound

// Per completed read (in position order: reads[k] its position), its threshold: every
// Δ below it refuted (delta < 0), or every own shift below it with the other reads moved
// delta earlier. drop may be NULL (nothing droppable).
static void read_thresholds(int32_t n, const int8_t *kind, const int32_t *val,
                            const int32_t *exp, const int64_t *invoke, const int64_t *complete,
                            const uint8_t *drop, int32_t init, int64_t delta,
                            std::vector<int32_t> &reads, std::vector<int64_t> &out) {
    using bound::ALWAYS, bound::CAS, bound::CAS_FAILED, bound::NONE, bound::READ,
        bound::UNKNOWN_END, bound::WINDOW, bound::WRITE;
    reads.clear();
    out.clear();
    for (int32_t i = 0; i < n; ++i)
        if (kind[i] == READ && complete[i] != UNKNOWN_END) reads.push_back(i);
    if (reads.empty()) return;
    // C_r: the latest completion (info: ALWAYS) of a write or compare of r's value invoked
    // no later than r completes. Writes and compares sorted by (value, invoke), with a
    // running maximum of completions along each value's run.
    std::vector<int32_t> p;
    for (int32_t i = 0; i < n; ++i)
        if (kind[i] == WRITE || kind[i] == CAS) p.push_back(i);
    std::sort(p.begin(), p.end(), [&](int32_t a, int32_t b) {
        return val[a] != val[b] ? val[a] < val[b] : invoke[a] < invoke[b];
    });
    std::vector<int64_t> run_max(p.size());
    for (size_t k = 0; k < p.size(); ++k) {
        int64_t c = std::min(complete[p[k]], ALWAYS);
        run_max[k] = k && val[p[k - 1]] == val[p[k]] ? std::max(run_max[k - 1], c) : c;
    }
    // the writes and compares that are kept (completed, not droppable) by invoke, and the
    // least completion among those invoked after each
    std::vector<int32_t> fixed;
    for (int32_t i : p)
        if (complete[i] != UNKNOWN_END && !(drop && drop[i])) fixed.push_back(i);
    std::stable_sort(fixed.begin(), fixed.end(),
                     [&](int32_t a, int32_t b) { return invoke[a] < invoke[b]; });
    std::vector<int64_t> fixed_inv(fixed.size()), sufmin(fixed.size() + 1, UNKNOWN_END);
    for (size_t k = 0; k < fixed.size(); ++k) fixed_inv[k] = invoke[fixed[k]];
    for (size_t k = fixed.size(); k-- > 0;) sufmin[k] = std::min(sufmin[k + 1], complete[fixed[k]]);
    // completed reads and failed compares (they show a state other than some v) by
    // completion, ties in position order
    std::vector<int32_t> other;
    for (int32_t i = 0; i < n; ++i)
        if ((kind[i] == READ || kind[i] == CAS_FAILED) && complete[i] != UNKNOWN_END)
            other.push_back(i);
    std::stable_sort(other.begin(), other.end(),
                     [&](int32_t a, int32_t b) { return complete[a] < complete[b]; });
    std::vector<int64_t> other_end(other.size());
    for (size_t k = 0; k < other.size(); ++k) other_end[k] = complete[other[k]];
    out.resize(reads.size());
    for (size_t k = 0; k < reads.size(); ++k) {
        int32_t r = reads[k];
        int32_t v = val[r];
        int64_t r_inv = invoke[r];
        // C_r: the run of v's writes, those invoked by r's completion a prefix of it
        auto lo = std::lower_bound(p.begin(), p.end(), v,
                                   [&](int32_t a, int32_t x) { return val[a] < x; });
        auto hi = std::upper_bound(lo, p.end(), v,
                                   [&](int32_t x, int32_t a) { return x < val[a]; });
        auto upto = std::upper_bound(lo, hi, complete[r],
                                     [&](int64_t t, int32_t a) { return t < invoke[a]; });
        int64_t c = upto == lo ? NONE : run_max[(upto - p.begin()) - 1];
        if (c == NONE && v != init) {
            out[k] = ALWAYS;  // a read of a value no write gives: never linearizable
            continue;
        }
        // a kept write or compare invoked after C_r and completed before r starts
        size_t f = std::upper_bound(fixed_inv.begin(), fixed_inv.end(), c) - fixed_inv.begin();
        int64_t least = sufmin[f];
        int64_t t = least < UNKNOWN_END ? r_inv - std::min(least, ALWAYS) : NONE;
        // the first WINDOW reads of other values or failed compares of v completing after
        // C_r
        size_t at = std::upper_bound(other_end.begin(), other_end.end(), c) - other_end.begin();
        size_t stop = std::min(other.size(), at + WINDOW);
        for (size_t j = at; j < stop; ++j) {
            int32_t w = other[j];
            bool w_read = kind[w] == READ;
            if (w_read ? val[w] == v : exp[w] != v) continue;  // shows v's state
            int64_t before = r_inv - complete[w];  // w is before r while Δ (or r's shift) is below
            int64_t t2;
            if (delta < 0) {
                // a read's start passes C_r while Δ < its invoke - C_r; a compare's
                // whenever its invoke does
                int64_t above = w_read ? invoke[w] - c : (invoke[w] > c ? ALWAYS : NONE);
                t2 = std::min(before, above);
            } else {
                int64_t start = invoke[w] - (w_read ? delta : 0);
                t2 = start > c ? before : NONE;
            }
            t = std::max(t, t2);
        }
        out[k] = t;
    }
}

// read_bound.refuted_below: the largest Δ' such that the history is linearizable at no
// Δ < Δ' (0: none shown; bound::ALWAYS: at no Δ at all).
static int64_t refuted_below(int32_t n, const int8_t *kind, const int32_t *val,
                             const int32_t *exp, const int64_t *invoke, const int64_t *complete,
                             const uint8_t *drop, int32_t init) {
    std::vector<int32_t> reads;
    std::vector<int64_t> t;
    read_thresholds(n, kind, val, exp, invoke, complete, drop, init, -1, reads, t);
    int64_t best = 0;
    for (int64_t x : t) best = std::max(best, x);
    return best;
}

}  // namespace llwgl

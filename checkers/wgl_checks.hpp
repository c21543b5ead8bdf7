// The plain check's steps past the minimal Δ, compiled over the search's columns: each
// stale read's own shift (checkers/staleness.py's read_staleness) and the shrinking of a
// counterexample (checkers/explain.py's minimal_ops), step for step as there: the same
// searches in the same order, so the same answers, memo sizes and budgets. Python called
// one search at a time for them, and its calls cost more than a small key's searches.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "wgl_core.hpp"

namespace llwgl {

struct BudgetOut {};  // a search ran out of time or states (Python's BudgetExceeded)

using steady = std::chrono::steady_clock;

static inline steady::time_point deadline_in(double seconds) {
    return steady::now() +
           std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
}

static inline double seconds_to(steady::time_point deadline) {
    return std::max(0.0, std::chrono::duration<double>(deadline - steady::now()).count());
}

// Each moved read's own staleness, as checkers/staleness.py's read_staleness (which
// documents it), from a linearization at `delta` (order): the reads it moved (of those
// with only[i] set, where only is given) are each decided by searches with that read's
// invoke moved by its own shift and every other read's by delta. out receives (position,
// shift) per moved read in linearization order; returns whether all were decided (else
// the rest keep their upper bounds). Each search may memoise max_states entries;
// *states receives their sum. carry (nullptr: none): states proven dead at shifts of
// every read at least delta (min_delta's passing searches'), read as visited by every
// search here, each of which shifts every read by at most delta. carry_own: each read's
// searches carry their own too (below).
static bool read_staleness(int32_t n, const int8_t *kind, const int32_t *val,
                           const int32_t *exp, const int64_t *invoke, const int64_t *end,
                           const uint8_t *drop, int32_t init, int64_t delta,
                           const int32_t *order, int32_t order_len, const uint8_t *only,
                           int64_t max_states, double seconds, bool own_floors,
                           int64_t *states, std::vector<std::pair<int32_t, int64_t>> &out,
                           DeadStates *carry = nullptr, bool carry_own = false) {
    const int64_t UNKNOWN = INT64_MAX;
    const auto deadline = deadline_in(seconds);
    *states = 0;
    out.clear();
    if (!delta) return true;
    // the moves of a linearization: positions (in its order) and uncapped shifts
    std::vector<int32_t> mpos;
    std::vector<int64_t> mshift;
    auto moves = [&](const int32_t *o, int32_t len) {
        mpos.clear();
        mshift.clear();
        int64_t later = UNKNOWN;
        for (int32_t k = len; k-- > 0;) {
            int32_t i = o[k];
            if (kind[i] == READ && later < invoke[i]) {
                mpos.push_back(i);
                mshift.push_back(invoke[i] - later);
            }
            later = std::min(later, end[i]);
        }
        std::reverse(mpos.begin(), mpos.end());
        std::reverse(mshift.begin(), mshift.end());
    };
    moves(order, order_len);
    std::vector<std::pair<int32_t, int64_t>> moved;
    for (size_t k = 0; k < mpos.size(); ++k) {
        int64_t s = std::min(mshift[k], delta);
        if (s > 0 && (!only || only[mpos[k]])) moved.emplace_back(mpos[k], s);
    }
    if (moved.empty()) return true;
    std::vector<int64_t> comps;  // sorted, unique
    for (int32_t i = 0; i < n; ++i)
        if (end[i] != UNKNOWN) comps.push_back(end[i]);
    std::sort(comps.begin(), comps.end());
    comps.erase(std::unique(comps.begin(), comps.end()), comps.end());
    std::vector<int64_t> at_delta(n), start(n);
    for (int32_t i = 0; i < n; ++i) at_delta[i] = kind[i] == READ ? delta : 0;
    std::vector<int64_t> upper(n, 0), done(n, 0);
    std::vector<uint8_t> is_moved(n, 0), pending(n, 0), settled(n, 0), in_shift(n, 0);
    std::vector<int32_t> pending_list;  // the moved reads, pending or not (check pending)
    for (auto &[p, s] : moved) {
        upper[p] = s;
        is_moved[p] = 1;
        pending[p] = 1;
        pending_list.push_back(p);
    }
    // read_bound's floor of each moved read's own shift (0: none shown)
    std::vector<int64_t> floor_of(n, 0);
    if (own_floors) {
        std::vector<int32_t> reads;
        std::vector<int64_t> t;
        read_thresholds(n, kind, val, exp, invoke, end, drop, init, delta, reads, t);
        for (size_t k = 0; k < reads.size(); ++k)
            if (is_moved[reads[k]] && t[k] > 0 && t[k] < bound::ALWAYS) floor_of[reads[k]] = t[k];
    }
    int64_t done_count = 0, done_stale = 0;  // of the reads without a floor
    size_t queue_size = 0;
    int64_t fails = 0, fail_states = 0, passes = 0, pass_states = 0;
    std::vector<int32_t> got_order(std::max(n, 1)), got_longest(std::max(n, 1)), needs_at(n, -1);
    std::vector<int64_t> needs(n, 0);
    // The searches for one read's own shift (narrow, and those before it) each follow
    // only passing ones at larger shifts of that read, every other read at delta: the
    // passing ones' dead states are kept for the later ones (mine, one read's at a time;
    // checkers/wgl.py, "Carrying dead states"), beside carry.
    DeadStates mine;
    mine.cap = max_states;
    bool own_carry = carry_own;
    auto fresh_read = [&] {
        if (own_carry) mine = DeadStates{}, mine.cap = max_states;
    };
    // linearizable with these reads at these shifts, every other read at delta?
    auto test = [&](const std::vector<std::pair<int32_t, int64_t>> &shift) {
        // (a group's test is one search: nothing follows it at smaller shifts)
        DeadStates *keep = own_carry && shift.size() == 1 ? &mine : nullptr;
        for (int32_t i = 0; i < n; ++i) start[i] = invoke[i] - at_delta[i];
        for (auto &[p, s] : shift) {
            start[p] = invoke[p] - s;
            in_shift[p] = 1;
        }
        int64_t used = 0;
        int32_t ol = 0, ll = 0;
        // (the memo sized for the passing searches' mean, as min_delta's passes)
        int rc = search(n, kind, val, exp, start.data(), end, drop, init, max_states,
                        seconds_to(deadline), &used, got_order.data(), &ol,
                        got_longest.data(), &ll, carry, keep, keep,
                        passes ? pass_states / passes : 0);
        *states += used;
        if (rc == OUT_OF_TIME || rc == OUT_OF_STATES) throw BudgetOut{};
        bool ok = rc == OK;
        if (ok) {
            ++passes;
            pass_states += used;
            moves(got_order.data(), ol);
            for (size_t k = 0; k < mpos.size(); ++k) {
                needs[mpos[k]] = mshift[k];
                needs_at[mpos[k]] = 1;
            }
            for (int32_t p : pending_list)
                if (pending[p] && !in_shift[p])
                    upper[p] = std::min(upper[p], needs_at[p] > 0 ? needs[p] : 0);
            for (int32_t p : mpos) needs_at[p] = -1;
        } else {
            ++fails;
            fail_states += used;
        }
        for (auto &[p, s] : shift) in_shift[p] = 0;
        return ok;
    };
    auto settle = [&](int32_t p, int64_t s) {
        if (floor_of[p] > 0) {  // known stale: not one of those the groups estimate
            settled[p] = 1;
        } else if (!settled[p]) {
            settled[p] = 1;
            ++done_count;
            if (s > 0) ++done_stale;
        } else if ((done[p] > 0) != (s > 0)) {
            done_stale += s > 0 ? 1 : -1;
        }
        done[p] = s;
        pending[p] = 0;
    };
    auto group_size = [&]() -> size_t {
        if (!fails || !passes) return 1;  // no failure priced yet (staleness.py)
        double r = std::max(1.0, (double)fail_states / (double)fails) /
                   std::max(1.0, (double)pass_states / (double)passes);
        double p = (double)(done_stale + 1) / (double)(done_count + 2);
        double best = 1 / (p * r * std::log(2.0));
        if (best < 2) return 1;
        int bits = (int)std::log2(best);
        return bits >= 62 ? queue_size : (size_t)1 << bits;  // past every read anyway
    };
    auto stale_first = [&]() {
        double p = (double)(done_stale + 1) / (double)(done_count + 2);
        if (!fails || !passes) return p > 0.5;
        return p * (double)fail_states / (double)fails >
               (1 - p) * (double)pass_states / (double)passes;
    };
    std::vector<int32_t> queue, shown;  // shown: the reads with a floor, first
    for (auto &[p, s] : moved) (floor_of[p] > 0 ? shown : queue).push_back(p);
    queue_size = queue.size();
    auto most_moved = [&](int32_t a, int32_t b) {
        return upper[a] != upper[b] ? upper[a] > upper[b] : a < b;
    };
    std::sort(queue.begin(), queue.end(), most_moved);
    std::sort(shown.begin(), shown.end(), most_moved);
    size_t head = 0;
    std::vector<std::vector<int32_t>> split;
    std::vector<int32_t> group, cands;
    std::vector<std::pair<int32_t, int64_t>> shift;
    std::vector<int64_t> cand;
    // invoke - completion in (0, bound), increasing, then the bound
    auto candidates = [&](int32_t pos) {
        cand.clear();
        for (size_t k = comps.size(); k-- > 0;) {
            int64_t d = invoke[pos] - comps[k];
            if (d > 0 && d < upper[pos]) cand.push_back(d);
        }
        cand.push_back(upper[pos]);
    };
    // the least shift in cand[a..b] that passes, cand[b] known to be enough: the one just
    // below the bound first (b is still the bound only then), then bisecting
    auto narrow = [&](int32_t pos, size_t a, size_t b) {
        while (a < b) {
            size_t mid = b == cand.size() - 1 ? b - 1 : (a + b) / 2;
            shift.assign(1, {pos, cand[mid]});
            if (test(shift))
                b = mid;
            else
                a = mid + 1;
        }
        settle(pos, cand[b]);
    };
    try {
        for (int32_t pos : shown) {
            // no shift below its floor passes: narrowed from the least candidate from it
            // up, without the search at 0
            fresh_read();
            candidates(pos);
            size_t b = cand.size() - 1;
            size_t a = std::min<size_t>(
                std::lower_bound(cand.begin(), cand.end(), floor_of[pos]) - cand.begin(), b);
            if (!fails && !queue.empty()) {
                // no failure priced yet: the search the floor shows failing, just below
                // it, prices one (the group tests need it, as without floors; with no
                // read left for them, nothing reads the price: it fails, so it bounds no
                // read and gives no dead states)
                shift.assign(1, {pos, a ? cand[a - 1] : 0});
                test(shift);
            }
            narrow(pos, a, b);
        }
        while (!split.empty() || head < queue.size()) {
            if (!split.empty()) {
                group = std::move(split.back());
                split.pop_back();
            } else {
                size_t size = group_size();
                size_t stop = std::min(queue.size(), head + size);
                group.assign(queue.begin() + head, queue.begin() + stop);
                head = stop;
            }
            for (int32_t p : group)
                if (pending[p] && upper[p] == 0) settle(p, 0);
            group.erase(std::remove_if(group.begin(), group.end(),
                                       [&](int32_t p) { return !pending[p]; }),
                        group.end());
            if (group.size() > 1) {
                shift.clear();
                for (int32_t p : group) shift.emplace_back(p, 0);
                if (test(shift)) {
                    for (int32_t p : group) settle(p, 0);
                } else {
                    size_t half = group.size() / 2;
                    split.emplace_back(group.begin() + half, group.end());
                    split.emplace_back(group.begin(), group.begin() + half);
                }
                continue;
            }
            if (group.empty()) continue;
            int32_t pos = group[0];
            fresh_read();
            candidates(pos);
            size_t a = 0, b = cand.size() - 1;  // cand[b] is known to be enough
            if (b > 0 && stale_first()) {
                // failing just below the bound settles the read at it without testing 0
                shift.assign(1, {pos, cand[b - 1]});
                if (!test(shift)) {
                    settle(pos, cand[b]);
                    continue;
                }
                b -= 1;
            }
            shift.assign(1, {pos, 0});
            if (test(shift)) {
                settle(pos, 0);
                continue;
            }
            narrow(pos, a, b);
        }
    } catch (const BudgetOut &) {
        for (auto &[p, s] : moved) out.emplace_back(p, settled[p] ? done[p] : upper[p]);
        return false;
    }
    for (auto &[p, s] : moved) out.emplace_back(p, done[p]);
    return true;
}

// A small sub-history that is not linearizable with the reads' invokes moved as `start`
// gives (every read by Δ, some by their own shifts), as checkers/explain.py's
// minimal_ops (which documents it), step for step: the compiled refutations' few
// operations, else the shortest prefix by completion time, then runs of operations and
// single ones deleted while it stays so; keep (-1: none) is never deleted. The searches
// together may memoise max_work entries (-1: no bound) within `seconds`. rows receives
// the positions kept (ascending); returns false where more than max_shown are left.
class Shrink {
  public:
    Shrink(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
           const int64_t *invoke, const int64_t *start, const int64_t *end, int32_t init,
           int64_t max_work, double seconds)
        : n_(n), kind_(kind), val_(val), exp_(exp), invoke_(invoke), start_(start),
          end_(end), init_(init), max_work_(max_work), deadline_(deadline_in(seconds)) {
        int32_t top = std::max(init, 0);
        for (int32_t i = 0; i < n; ++i) top = std::max({top, val[i], exp[i]});
        codes_ = top + 2;  // by code + 1 (-1 too)
        remap_.assign(codes_, -1);
        stamp_.assign(codes_, 0);
        ever_.assign(codes_, 0);
        ever_[init + 1] = 1;
        for (int32_t i = 0; i < n; ++i)
            if (kind[i] == WRITE || kind[i] == CAS) ever_[val[i] + 1] = 1;
        written_.assign(codes_, 0);
    }

    struct Op {
        int32_t pos;
        bool cut;  // still running at the cut: outcome unknown
    };

    // not linearizable? (throws BudgetOut where the search runs out)
    bool bad(const std::vector<Op> &sub) {
        int32_t m = (int32_t)sub.size();
        if (m == 0) return false;
        // the values observed in sub, coded in order of first observation (as
        // wgl_compiled.encode codes a list of operations): every other value is -1
        ++gen_;
        int32_t next = 0;
        auto code_of = [&](int32_t c) {
            if (c < 0) return -1;
            return stamp_[c + 1] == gen_ ? remap_[c + 1] : -1;
        };
        for (const Op &o : sub) {
            int8_t f = kind_[o.pos];
            int32_t c;
            if (f == READ)
                c = val_[o.pos];
            else if (f == CAS || f == CAS_FAILED)
                c = exp_[o.pos];
            else
                continue;
            if (c >= 0 && stamp_[c + 1] != gen_) {
                stamp_[c + 1] = gen_;
                remap_[c + 1] = next++;
            }
        }
        k2_.resize(m);
        v2_.resize(m);
        e2_.resize(m);
        s2_.resize(m);
        t2_.resize(m);
        for (int32_t j = 0; j < m; ++j) {
            int32_t i = sub[j].pos;
            k2_[j] = kind_[i];
            v2_[j] = code_of(val_[i]);
            e2_[j] = code_of(exp_[i]);
            s2_[j] = start_[i];
            t2_[j] = sub[j].cut ? INT64_MAX : end_[i];
        }
        order_.resize(m);
        longest_.resize(m);
        int64_t used = 0;
        int32_t ol = 0, ll = 0;
        int rc = search(m, k2_.data(), v2_.data(), e2_.data(), s2_.data(), t2_.data(), nullptr,
                        code_of(init_), room(), seconds_to(deadline_), &used, order_.data(),
                        &ol, longest_.data(), &ll);
        states += used;
        if (rc == OUT_OF_TIME || rc == OUT_OF_STATES) throw BudgetOut{};
        return rc != OK;
    }

    // every read of a value the history wrote, and every compare-and-set expecting one,
    // still has a write of it in sub
    bool supported(const std::vector<Op> &sub) {
        std::fill(written_.begin(), written_.end(), 0);
        written_[init_ + 1] = 1;
        for (const Op &o : sub)
            if (kind_[o.pos] == WRITE || kind_[o.pos] == CAS) written_[val_[o.pos] + 1] = 1;
        for (const Op &o : sub) {
            int8_t f = kind_[o.pos];
            int32_t c = f == READ ? val_[o.pos] : f == CAS ? exp_[o.pos] : -2;
            if (c != -2 && !written_[c + 1] && ever_[c + 1]) return false;
        }
        return true;
    }

    int64_t room() const {
        const int64_t most = (int64_t)1 << 62;
        return max_work_ < 0 ? most : std::max<int64_t>(0, std::min(most, max_work_ - states));
    }

    // the history as known at time t: later invocations gone, running ones unknown
    void cut(int64_t t, std::vector<Op> &out) const {
        out.clear();
        for (int32_t i = 0; i < n_; ++i) {
            if (invoke_[i] > t) continue;
            if (end_[i] > t) {
                if (kind_[i] == READ || kind_[i] == CAS_FAILED) continue;
                out.push_back({i, true});
            } else {
                out.push_back({i, false});
            }
        }
    }

    // the compiled refutations' few operations (checkers/explain.py's _refuted); false:
    // none found
    bool refuted(const uint8_t *drop, std::vector<Op> &few, int32_t window_ops,
                 int64_t windows_states, int64_t window_states) {
        few.clear();
        // a read of a value nobody wrote is explained by itself: droppable, it refutes
        // nothing, so the refutations look past it
        std::vector<uint8_t> wrote(codes_, 0), unwritten(n_, 0);
        for (int32_t i = 0; i < n_; ++i)
            if (kind_[i] == WRITE || kind_[i] == CAS) wrote[val_[i] + 1] = 1;
        bool any = false;
        for (int32_t i = 0; i < n_; ++i) {
            if (kind_[i] == READ && !wrote[val_[i] + 1] && val_[i] != init_) {
                unwritten[i] = 1;
                any = true;
            }
        }
        const uint8_t *d = any ? unwritten.data() : drop;
        int32_t r = overwritten_read(n_, kind_, val_, start_, end_, d);
        if (r >= 0) {
            auto writes = [&](int32_t i) { return kind_[i] == WRITE || kind_[i] == CAS; };
            int32_t over = -1, mine = -1;
            for (int32_t i = 0; i < n_; ++i) {
                if (writes(i) && end_[i] != INT64_MAX && end_[i] < start_[r] &&
                    val_[i] != val_[r] && (over < 0 || start_[i] > start_[over]))
                    over = i;
                if (writes(i) && val_[i] == val_[r] && start_[i] <= end_[r] &&
                    (mine < 0 || end_[i] > end_[mine]))
                    mine = i;
            }
            std::vector<int32_t> rows{r};
            if (over >= 0) rows.push_back(over);
            if (mine >= 0) rows.push_back(mine);
            std::sort(rows.begin(), rows.end());
            for (int32_t i : rows) few.push_back({i, false});
            return true;
        }
        int64_t windows = std::min(room(), windows_states), used = 0;
        std::vector<int32_t> window;
        int rc = refute<steady>(n_, kind_, val_, exp_, start_, end_, d, window_ops, windows,
                                std::min(windows, window_states),
                                std::max(deadline_, steady::now()), &used, &window);
        states += used;
        if (rc != FAIL) return false;
        std::sort(window.begin(), window.end());
        for (int32_t i : window) few.push_back({i, false});
        return true;
    }

    int64_t states = 0;

  private:
    int32_t n_;
    const int8_t *kind_;
    const int32_t *val_, *exp_;
    const int64_t *invoke_, *start_, *end_;
    int32_t init_;
    int64_t max_work_;
    steady::time_point deadline_;
    int32_t codes_;
    std::vector<int32_t> remap_;
    std::vector<uint32_t> stamp_;
    uint32_t gen_ = 0;
    std::vector<uint8_t> ever_, written_;
    std::vector<int8_t> k2_;
    std::vector<int32_t> v2_, e2_, order_, longest_;
    std::vector<int64_t> s2_, t2_;
};

static bool minimal_ops(int32_t n, const int8_t *kind, const int32_t *val, const int32_t *exp,
                        const int64_t *invoke, const int64_t *start, const int64_t *end,
                        const uint8_t *drop, int32_t init, int32_t keep, int64_t max_work,
                        double seconds, int32_t window_ops, int64_t windows_states,
                        int64_t window_states, int32_t quick_shrink_above, int32_t max_shown,
                        int64_t *states, std::vector<int32_t> &rows) {
    using Op = Shrink::Op;
    Shrink s(n, kind, val, exp, invoke, start, end, init, max_work, seconds);
    std::vector<Op> kept(n), few, trial;
    for (int32_t i = 0; i < n; ++i) kept[i] = {i, false};
    try {
        bool has_keep = keep < 0;
        bool found = s.refuted(drop, few, window_ops, windows_states, window_states);
        if (found && keep >= 0)
            for (const Op &o : few) has_keep = has_keep || o.pos == keep;
        if (found && has_keep && s.supported(few) && s.bad(few)) {
            kept = few;
        } else {
            std::vector<int64_t> ends;
            for (int32_t i = 0; i < n; ++i)
                if (end[i] != INT64_MAX) ends.push_back(end[i]);
            std::sort(ends.begin(), ends.end());
            ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
            size_t lo = 0, hi = ends.empty() ? 0 : ends.size() - 1;
            bool hi_known = false;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                s.cut(ends[mid], trial);
                if (s.bad(trial)) {
                    hi = mid;
                    hi_known = true;
                } else {
                    lo = mid + 1;
                }
            }
            if (!ends.empty()) {
                s.cut(ends[lo], trial);
                if (hi_known || s.bad(trial)) kept = trial;
            }
        }
        // the last to complete (the first of them), never deleted by runs
        size_t last = 0;
        auto done_at = [&](const Op &o) { return o.cut || end[o.pos] == INT64_MAX ? -1 : end[o.pos]; };
        for (size_t k = 1; k < kept.size(); ++k)
            if (done_at(kept[k]) > done_at(kept[last])) last = k;
        int32_t last_pos = kept[last].pos;
        size_t run = kept.size() / 2;
        while (run > 1 && (int32_t)kept.size() > quick_shrink_above) {
            size_t i = kept.size();
            while (i > 0) {
                size_t j = i > run ? i - run : 0;
                trial.assign(kept.begin(), kept.begin() + j);
                for (size_t k = j; k < i; ++k)
                    if (kept[k].pos == last_pos || kept[k].pos == keep) trial.push_back(kept[k]);
                trial.insert(trial.end(), kept.begin() + i, kept.end());
                if (s.supported(trial) && s.bad(trial)) kept = trial;
                i = j;
            }
            run /= 2;
        }
        for (size_t i = kept.size(); i-- > 0;) {
            if (kept[i].pos == keep || kept.size() < 2) continue;
            trial.assign(kept.begin(), kept.begin() + i);
            trial.insert(trial.end(), kept.begin() + i + 1, kept.end());
            if (s.supported(trial) && s.bad(trial)) kept = trial;
        }
    } catch (const BudgetOut &) {
        // the work allowed is spent: keep what is known to fail
    }
    *states = s.states;
    rows.clear();
    if ((int32_t)kept.size() > max_shown) return false;
    for (const Op &o : kept) rows.push_back(o.pos);
    return true;
}

}  // namespace llwgl

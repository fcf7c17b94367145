/* test_plan.c — learning a training loop's step from the requests (alloc/plan.h), and the
 * cyclic packing of a plan. A made-up loop: parameters allocated once, then steps whose
 * forward pass runs L identical layers (each keeping an activation and making 70
 * temporaries: a period of its own, but live memory grows across it), a loss, and a
 * backward pass freeing the activations in reverse order. */
#include <stdlib.h>
#include <string.h>

#include "alloc/plan.h"
#include "harness.h"

#define LAYERS 12
#define TEMPS 70
#define PARAMS 10

typedef struct {
    vg_plan_t *p;
    uint64_t req;                /* next request number */
    uint64_t act[LAYERS], act_size[LAYERS];
} loop_t;

static bool g_place;       /* alloc() also asks for the request's place, as arena.c does */
static uint64_t g_placed;  /* ... and counts those the plan placed */

static uint64_t alloc(loop_t *l, uint64_t size) {
    if (g_place) {
        uint64_t height, gen;
        bool hole;
        uint32_t item;
        if (vg__plan_dormant(l->p))
            vg__plan_resumes(l->p, l->req, size);
        if (vg__plan_following(l->p, &height, &gen) &&
            vg__plan_place(l->p, l->req, size, &hole, &item) != VG_PLAN_NONE)
            g_placed++;
    }
    vg__plan_alloc(l->p, l->req, size);
    return l->req++;
}

static uint64_t g_odd = UINT64_MAX; /* step(): the request of the step made of another size */
static bool g_keep_grads;          /* step(): its gradients kept, in g_grads (accumulation) */
static uint64_t g_grads[LAYERS];

/* One step; returns the requests it made. */
static uint64_t step(loop_t *l, uint64_t scale) {
    uint64_t first = l->req;
    for (int i = 0; i < LAYERS; i++) {
        l->act_size[i] = 4096 * scale;
        l->act[i] = alloc(l, l->act_size[i]);
        for (int t = 0; t < TEMPS; t++) {
            uint64_t size = 512 * (uint64_t)(t % 7 + 1) * scale;
            size = l->req - first == g_odd ? 999 * 512 : size;
            uint64_t r = alloc(l, size);
            vg__plan_release(l->p, r, size);
        }
    }
    uint64_t loss = alloc(l, 1024);
    for (int i = LAYERS - 1; i >= 0; i--) {
        uint64_t g = alloc(l, 8192);
        vg__plan_release(l->p, l->act[i], l->act_size[i]);
        if (g_keep_grads) /* (the first micro-batch's: kept as the gradients) */
            g_grads[i] = g;
        else
            vg__plan_release(l->p, g, 8192);
    }
    vg__plan_release(l->p, loss, 1024);
    return l->req - first;
}

static void params(loop_t *l) {
    for (int i = 0; i < PARAMS; i++)
        alloc(l, 65536);
}

VG_TEST(a_step_is_found_and_a_layer_is_not) {
    loop_t l = {vg__plan_new(false)};
    CHECK(l.p != NULL);
    params(&l);
    uint64_t len = 0;
    for (int s = 0; s < 8; s++)
        len = step(&l, 1);
    vg_plan_report_t r;
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.period, len); /* not TEMPS + 1, a layer's period */
    CHECK_EQ(r.found, 1);     /* and no plan was ever made for a layer, then dropped */
    CHECK(r.found_at >= 3 * len + PARAMS && r.found_at <= 5 * len + PARAMS);
    CHECK_EQ(r.long_lived, PARAMS * 65536); /* the parameters: nothing else outlives a step */
    /* the planned peak: every activation, the loss, the largest temporary and the first
     * gradient at once; a plan can do no better, and this one does that well */
    uint64_t peak = LAYERS * 4096 + 1024 + 8192;
    CHECK_EQ(r.planned_peak, peak);
    CHECK_EQ(r.height, peak);
    CHECK_EQ(r.since, l.req - r.found_at);
    CHECK_EQ(r.repeated, r.since);
    vg__plan_free(l.p);
}

VG_TEST(a_period_that_stops_repeating_is_dropped_and_the_step_learnt_again) {
    loop_t l = {vg__plan_new(false)};
    params(&l);
    for (int s = 0; s < 14; s++) /* found after 4 or 5, then held for 8 or more */
        step(&l, 1);
    vg_plan_report_t r;
    vg__plan_get(l.p, &r);
    CHECK(r.period != 0);
    uint64_t first = r.period;
    /* The program changes its sizes for good (a larger batch: every activation and
     * temporary): the old step is dropped after a period unlike it, and the new one
     * learnt. */
    uint64_t len = 0;
    for (int s = 0; s < 8; s++)
        len = step(&l, 3);
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.period, len);
    CHECK_EQ(len, first);
    CHECK(r.found_at > 14 * len); /* learnt again, after the change */
    CHECK_EQ(r.planned_peak, LAYERS * 4096 * 3 + 7 * 512 * 3); /* the largest temporary now */
    vg__plan_free(l.p);
}

VG_TEST(a_program_that_changes_loses_its_plan_within_a_twentieth_of_a_period) {
    /* Run again in the same process, a training loop starts with other requests (its
     * model and optimizer made anew): until the plan is dropped, every request whose size
     * happens to match the plan's at its place is put in the arena, and pins a page there.
     * So the plan goes at the request that makes more than 5 % of the period unlike the
     * step, not at the period's end. */
    vg_plan_t *p = vg__plan_new(true);
    loop_t l = {p};
    params(&l);
    for (int s = 0; s < 14; s++)
        step(&l, 1);
    uint64_t height, gen;
    CHECK(vg__plan_following(p, &height, &gen));
    vg_plan_report_t r;
    vg__plan_get(p, &r);
    uint64_t period = r.period, after = 0;
    CHECK(period > 400); /* (so a twentieth is far from a period's end) */
    /* Requests of a size the step never makes, one after another (each freed at once). */
    while (vg__plan_following(p, &height, &gen) && after < 2 * period) {
        uint64_t q = alloc(&l, 12345 * 512);
        vg__plan_release(p, q, 12345 * 512);
        after++;
    }
    CHECK_EQ(after, period / 20 + 1);
    vg__plan_free(p);
}

/* plan=on: a loop whose requests ask the plan for their places as arena.c does (g_place),
 * its parameters made; end with placing_done(). */
static loop_t placing_start(void) {
    g_place = true;
    loop_t l = {vg__plan_new(true)};
    params(&l);
    return l;
}

/* ... and its step found and followed (14 steps). */
static loop_t placing_loop(void) {
    loop_t l = placing_start();
    for (int s = 0; s < 14; s++)
        step(&l, 1);
    return l;
}

static void placing_done(loop_t *l) {
    g_place = false;
    vg__plan_free(l->p);
}

/* 60 requests of a size the step never makes, each freed at once: an evaluation between
 * training steps, as far as the plan can tell. */
static void evaluation(loop_t *l) {
    for (int k = 0; k < 60; k++) {
        uint64_t q = alloc(l, 777 * 512);
        vg__plan_release(l->p, q, 777 * 512);
    }
}

VG_TEST(a_step_interrupted_by_an_evaluation_takes_its_plan_up_again) {
    loop_t l = placing_start();
    uint64_t len = 0;
    for (int s = 0; s < 14; s++)
        len = step(&l, 1);
    uint64_t height, gen, gen0;
    CHECK(vg__plan_following(l.p, &height, &gen0));
    evaluation(&l);
    CHECK(!vg__plan_following(l.p, &height, &gen));
    CHECK(vg__plan_dormant(l.p)); /* (held for 4 periods and more: it waits) */
    vg_plan_report_t r;
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.period, len); /* (the step it waits for) */
    /* A request of the step's first size, then one of another: taken up on trial, then
     * waiting again. */
    uint64_t q = alloc(&l, 4096);
    CHECK(vg__plan_following(l.p, &height, &gen));
    vg__plan_release(l.p, q, 4096);
    q = alloc(&l, 999 * 512);
    vg__plan_release(l.p, q, 999 * 512);
    CHECK(vg__plan_dormant(l.p));
    g_placed = 0;
    step(&l, 1); /* the step comes back: taken up from its first request */
    CHECK(vg__plan_following(l.p, &height, &gen));
    CHECK_EQ(gen, gen0); /* (the same plan, not one learnt again) */
    CHECK(g_placed + 2 >= len); /* (all but the loss, which lives across) */
    for (int s = 0; s < 4; s++)
        step(&l, 1);
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.found, 1);
    CHECK_EQ(r.resumed, 1);
    CHECK(vg__plan_following(l.p, &height, &gen)); /* (watched again, and held) */
    placing_done(&l);
}

/* A step that opens with a run of 10 requests of one size (kept to its end), then 400
 * temporaries; returns the requests placed by the plan. */
static uint64_t run_step(loop_t *l) {
    uint64_t kept[10], before = g_placed;
    for (int k = 0; k < 10; k++)
        kept[k] = alloc(l, 8192);
    for (int t = 0; t < 400; t++) {
        uint64_t r = alloc(l, 512 * (uint64_t)(t % 7 + 1));
        vg__plan_release(l->p, r, 512 * (uint64_t)(t % 7 + 1));
    }
    for (int k = 0; k < 10; k++)
        vg__plan_release(l->p, kept[k], 8192);
    return g_placed - before;
}

VG_TEST(a_plan_taken_up_a_request_early_is_set_right) {
    /* The evaluation's last request has the size the step opens with, and the step opens
     * with a run of it: the plan is taken up one request early, and its trial passes. Out
     * of phase, it places almost nothing; a period later it is dropped, set right by the
     * sizes of its cycle, and taken up again in phase (a review found it kept out of phase
     * for good). */
    loop_t l = placing_start();
    for (int s = 0; s < 16; s++)
        run_step(&l);
    uint64_t height, gen, gen0;
    CHECK(vg__plan_following(l.p, &height, &gen0));
    vg_plan_report_t r0; /* (patterns inside the step were found first, then dropped) */
    vg__plan_get(l.p, &r0);
    evaluation(&l);
    uint64_t q = alloc(&l, 8192);
    vg__plan_release(l.p, q, 8192);
    uint64_t placed = 0;
    for (int s = 0; s < 6; s++)
        placed = run_step(&l);
    CHECK_MSG(placed >= 400, "%llu of 410 placed in the last step", (unsigned long long)placed);
    vg_plan_report_t r;
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.found, r0.found); /* (set right, not learnt again) */
    CHECK(vg__plan_following(l.p, &height, &gen));
    CHECK_EQ(gen, gen0);
    placing_done(&l);
}

VG_TEST(after_a_request_of_another_size_8_are_left_to_general_memory) {
    /* A request unlike the plan (one in a step: the plan goes on) stops placement until 8
     * requests in a row are the plan's again (VG_PLAN_IN_STEP): a program out of step
     * meets the plan's sizes only now and then. */
    loop_t l = placing_loop();
    g_placed = 0;
    step(&l, 1);
    uint64_t all = g_placed;
    g_placed = 0;
    g_odd = 100; /* (a temporary of layer 1) */
    step(&l, 1);
    g_odd = UINT64_MAX;
    CHECK_EQ(all - g_placed, 1 + 8);
    uint64_t height, gen;
    CHECK(vg__plan_following(l.p, &height, &gen));
    placing_done(&l);
}

VG_TEST(a_plan_that_waits_too_long_is_forgotten) {
    loop_t l = placing_loop();
    evaluation(&l);
    CHECK(vg__plan_dormant(l.p));
    vg_plan_report_t r;
    vg__plan_get(l.p, &r);
    uint64_t cycle = 2 * r.period;
    for (uint64_t k = 0; k < 33 * cycle / 60; k++) /* (32 cycles of requests, and more) */
        evaluation(&l);
    CHECK(!vg__plan_dormant(l.p));
    uint64_t height, gen;
    CHECK(!vg__plan_following(l.p, &height, &gen) || gen > r.found);
    placing_done(&l);
}

VG_TEST(a_plan_followed_long_waits_as_long_as_its_longest_stretch) {
    /* A plan followed for 100 steps waits as long as that, not 32 cycles only: a real
     * evaluation runs over a whole validation set (ImageNet's, 782 batches of 64, is more
     * than 32 cycles of a ResNet's training step), and the training after it would be
     * learnt anew, its pages moved again. */
    loop_t l = placing_loop();
    for (int s = 0; s < 100; s++)
        step(&l, 1);
    vg_plan_report_t r0;
    vg__plan_get(l.p, &r0);
    uint64_t cycle = 2 * r0.period, longest = r0.since, height, gen0, gen;
    CHECK(vg__plan_following(l.p, &height, &gen0));
    CHECK(longest > 50 * cycle);
    for (uint64_t k = 0; k < 40 * cycle / 60; k++) /* (40 cycles of requests) */
        evaluation(&l);
    CHECK(vg__plan_dormant(l.p));
    g_placed = 0;
    for (int s = 0; s < 60; s++)
        step(&l, 1);
    CHECK(vg__plan_following(l.p, &height, &gen));
    CHECK_EQ(gen, gen0); /* (taken up again, not learnt anew) */
    CHECK(g_placed > 50 * r0.period);
    vg_plan_report_t r;
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.resumed, r0.resumed + 1);
    CHECK_EQ(r.found, r0.found);
    /* Interrupted again: it waits as long as its longest stretch (the first 100 steps),
     * not as long as both (the program may have left its loop for good). */
    for (uint64_t k = 0; k < (longest - 2 * cycle) / 60; k++)
        evaluation(&l);
    CHECK(vg__plan_dormant(l.p));
    for (uint64_t k = 0; k < 4 * cycle / 60; k++)
        evaluation(&l);
    CHECK(!vg__plan_dormant(l.p));
    CHECK(!vg__plan_following(l.p, &height, &gen) || gen > r0.found);
    placing_done(&l);
}

VG_TEST(a_model_made_anew_is_learnt_again_not_resumed) {
    /* The loop run again in the same process: its parameters freed, made anew. The plan
     * lays tensors beside the old ones (its holes), which are gone: learnt again. */
    loop_t l = placing_loop();
    for (uint64_t q = 0; q < PARAMS; q++)
        vg__plan_release(l.p, q, 65536);
    evaluation(&l);
    CHECK(!vg__plan_dormant(l.p));
    params(&l);
    for (int s = 0; s < 10; s++)
        step(&l, 1);
    vg_plan_report_t r;
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.resumed, 0);
    CHECK_EQ(r.found, 2);
    placing_done(&l);
}

/* Gradient accumulation: MICRO micro-batches (step()), the first keeping its gradients,
 * then the optimizer's own requests and the gradients freed (zero_grad). */
#define MICRO 10
static uint64_t optimizer_step(loop_t *l) {
    uint64_t first = l->req;
    for (int m = 0; m < MICRO; m++) {
        g_keep_grads = m == 0;
        step(l, 1);
    }
    g_keep_grads = false;
    for (int k = 0; k < 100; k++) { /* (the optimizer: more than 5 % of a micro-batch) */
        uint64_t q = alloc(l, 333 * 512);
        vg__plan_release(l->p, q, 333 * 512);
    }
    for (int i = 0; i < LAYERS; i++)
        vg__plan_release(l->p, g_grads[i], 8192);
    return l->req - first;
}

VG_TEST(gradient_accumulations_outer_step_is_found_and_followed) {
    /* An outer step longer than the longest step looked for (8,750 requests). The
     * micro-batch is found first and followed; at each optimizer step its plan waits, and
     * the gradients freed (an eighth of what outlived its steps) rebuild the state it was
     * made beside, so it is dropped, and found again in the next micro-batches. After the
     * second time, a steady distance apart, the outer step is looked for, found, and
     * followed: no more plans learnt every optimizer step. */
    loop_t l = placing_start();
    uint64_t len = 0;
    for (int s = 0; s < 8; s++)
        len = optimizer_step(&l);
    CHECK(len > VG_PLAN_MAX_PERIOD);
    vg_plan_report_t r;
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.period, len);
    uint64_t height, gen0, gen;
    CHECK(vg__plan_following(l.p, &height, &gen0));
    g_placed = 0;
    for (int s = 0; s < 8; s++)
        optimizer_step(&l);
    CHECK(vg__plan_following(l.p, &height, &gen));
    CHECK_EQ(gen, gen0);           /* (the same plan all along) */
    CHECK(g_placed > 7 * len);     /* (nearly every request placed by it) */
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.period, len);
    placing_done(&l);
}

VG_TEST(an_outer_steps_plan_dropped_early_lets_the_micro_batch_be_learnt_again) {
    /* Gradient accumulation's whole step found and followed; before its plan was held
     * long, the program evaluates, then trains without accumulating (a micro-batch a
     * step): the plan is dropped, and the micro-batch is looked for and found again (the
     * search once resumed from above the whole step: beyond the longest step looked for,
     * it never looked again). */
    loop_t l = placing_start();
    uint64_t len, height, gen;
    vg_plan_report_t r;
    int s = 0;
    do {
        len = optimizer_step(&l);
        vg__plan_get(l.p, &r);
    } while (++s < 12 && r.period != len);
    CHECK_EQ(r.period, len);
    for (int k = 0; k < 10; k++) /* (600 requests unlike the step: more than 5 % of it) */
        evaluation(&l);
    uint64_t micro = 0;
    for (s = 0; s < 20; s++)
        micro = step(&l, 1);
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.period, micro);
    CHECK(vg__plan_following(l.p, &height, &gen));
    placing_done(&l);
}

VG_TEST(a_pattern_inside_the_step_that_breaks_soon_is_passed_over) {
    /* Each step ends with an optimizer's loop over 8 layers of the same shapes: 80
     * balanced requests a layer (temporaries made and freed), a period of its own that
     * breaks at the step's end. The step is found; the loop's period is not kept. */
    vg_plan_t *p = vg__plan_new(false);
    uint64_t req = 0, len = 0;
    for (int s = 0; s < 24; s++) {
        uint64_t first = req, acts[4];
        for (int a = 0; a < 4; a++)
            vg__plan_alloc(p, acts[a] = req++, 1 << 20);
        for (int a = 3; a >= 0; a--)
            vg__plan_release(p, acts[a], 1 << 20);
        for (int layer = 0; layer < 8; layer++)
            for (int t = 0; t < 80; t++) {
                vg__plan_alloc(p, req, 4096 * (uint64_t)(t % 5 + 1));
                vg__plan_release(p, req++, 4096 * (uint64_t)(t % 5 + 1));
            }
        len = req - first;
    }
    vg_plan_report_t r;
    vg__plan_get(p, &r);
    CHECK_EQ(r.period, len);
    CHECK_EQ(r.planned_peak, 4 << 20);
    vg__plan_free(p);
}

VG_TEST(a_warm_up_that_repeats_one_size_does_not_hide_the_step) {
    /* 40,000 requests of one size, all kept (a cache filled): every period tried while it
     * lasts repeats and is rejected (live memory grows), so the search ends up above 200;
     * a step of 200 requests that follows is found as a multiple of itself, and cut back. */
    vg_plan_t *p = vg__plan_new(false);
    uint64_t req = 0;
    for (int i = 0; i < 40000; i++)
        vg__plan_alloc(p, req++, 4096);
    for (int s = 0; s < 40; s++)
        for (uint64_t i = 0; i < 200; i++) {
            vg__plan_alloc(p, req, 512 * (i + 1));
            vg__plan_release(p, req++, 512 * (i + 1));
        }
    vg_plan_report_t r;
    vg__plan_get(p, &r);
    CHECK_EQ(r.period, 200);
    CHECK_EQ(r.planned_peak, 200 * 512);
    vg__plan_free(p);
}

static uint64_t balanced_steps(uint64_t len, int steps) { /* distinct sizes, each freed */
    vg_plan_t *p = vg__plan_new(false);
    uint64_t req = 0;
    for (int s = 0; s < steps; s++)
        for (uint64_t i = 0; i < len; i++) {
            vg__plan_alloc(p, req, 512 * (i + 1));
            vg__plan_release(p, req++, 512 * (i + 1));
        }
    vg_plan_report_t r;
    vg__plan_get(p, &r);
    vg__plan_free(p);
    return r.period;
}

VG_TEST(steps_up_to_the_longest_looked_for_are_found) {
    CHECK_EQ(balanced_steps(64, 6), 64);
    CHECK_EQ(balanced_steps(VG_PLAN_MAX_PERIOD, 5), VG_PLAN_MAX_PERIOD);
    CHECK_EQ(balanced_steps(VG_PLAN_MAX_PERIOD + 1, 5), 0);
    CHECK_EQ(balanced_steps(63, 20), 126); /* shorter than 64: found as twice itself */
}

VG_TEST(no_step_in_a_program_that_only_grows) {
    loop_t l = {vg__plan_new(false)};
    for (uint64_t i = 0; i < 20000; i++) { /* a cache grown by concatenation */
        uint64_t r = alloc(&l, 512 * (i + 1));
        if (i)
            vg__plan_release(l.p, r - 1, 512 * i);
    }
    vg_plan_report_t r;
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.period, 0);
    /* the same sizes over and over, with live memory growing: no step either */
    for (uint64_t i = 0; i < 20000; i++)
        alloc(&l, 512);
    vg__plan_get(l.p, &r);
    CHECK_EQ(r.period, 0);
    vg__plan_free(l.p);
}

VG_TEST(requests_out_of_order_or_long_gone_change_nothing_unsafe) {
    vg_plan_t *p = vg__plan_new(false);
    vg__plan_alloc(p, 5, 4096); /* 0-4 skipped: counted as empty requests */
    vg__plan_alloc(p, 3, 512);  /* behind: not logged */
    vg__plan_release(p, 99, 512); /* never served */
    vg__plan_release(p, 5, 4096);
    vg__plan_release(p, 5, 4096); /* twice: live bytes do not go below zero */
    for (uint64_t i = 6; i < 200000; i++)
        vg__plan_alloc(p, i, 512);
    vg__plan_release(p, 7, 512); /* long out of the log's window */
    vg_plan_report_t r;
    vg__plan_get(p, &r);
    CHECK_EQ(r.period, 0); /* live memory grows all along: never a step */
    vg__plan_free(p);
}

VG_TEST(packing_shares_space_between_lifetimes_that_do_not_meet) {
    uint64_t off[4];
    /* a and b meet in time; c comes after both; d wraps around the cycle's end into a */
    vg_plan_item_t items[4] = {{1000, 0, 4}, {500, 2, 6}, {1500, 6, 9}, {200, 9, 11}};
    uint64_t h = vg__plan_pack(items, 4, 10, off);
    CHECK_EQ(h, 1500); /* c alone at the top; a, b and d fit below it */
    CHECK(off[0] + 1000 <= off[1] || off[1] + 500 <= off[0]); /* a and b apart */
    CHECK(off[3] + 200 <= off[0] || off[0] + 1000 <= off[3]); /* d (wrapping) and a apart */
    CHECK_EQ(vg__plan_pack(items, 0, 10, off), 0);
    /* everything live at once: stacked */
    vg_plan_item_t all[3] = {{100, 0, 10}, {300, 0, 10}, {200, 0, 10}};
    CHECK_EQ(vg__plan_pack(all, 3, 10, off), 600);
}

/* Checks that no two items (none wrapping) that live at once overlap in memory; returns
 * the top of the highest. */
static uint64_t packed_apart(const vg_plan_item_t *items, int n, const uint64_t *off) {
    uint64_t top = 0;
    for (int i = 0; i < n; i++) {
        if (off[i] + items[i].size > top)
            top = off[i] + items[i].size;
        for (int j = 0; j < i; j++) {
            bool meet = items[i].start < items[j].end && items[j].start < items[i].end;
            bool apart = off[i] + items[i].size <= off[j] || off[j] + items[j].size <= off[i];
            CHECK_MSG(!meet || apart, "items %d and %d meet in time and in memory", i, j);
        }
    }
    return top;
}

VG_TEST(a_packing_keeps_lifetimes_that_meet_apart_and_stays_near_their_peak) {
    /* Whatever order and gap rule win, no two items that live at once overlap in memory,
     * the height is the top of the highest, and it is at the peak of bytes live at once
     * (4000 + 1000 + 1500 at time 0) or one gap above it. */
    vg_plan_item_t items[5] = {{4000, 0, 5}, {3000, 6, 9}, {1000, 0, 2}, {2500, 3, 9},
                               {1500, 0, 1}};
    uint64_t off[5];
    uint64_t h = vg__plan_pack(items, 5, 10, off);
    CHECK_EQ(h, packed_apart(items, 5, off));
    CHECK(h >= 6500 && h <= 8000); /* the peak (4000 + 1000 + 1500) and at most one gap more */
}

VG_TEST(the_packing_kept_is_the_lowest_of_the_orders_tried) {
    /* By size, at the lowest offsets, these take 8192 bytes; by size x lifetime, 6144 (the
     * Python model's plan_offsets finds the same: bench/cyclic_plan_model.py). */
    vg_plan_item_t items[5] = {{1024, 1, 5}, {2560, 6, 8}, {2560, 3, 6}, {2048, 7, 13},
                               {2560, 9, 14}};
    uint64_t off[5];
    CHECK_EQ(vg__plan_pack(items, 5, 10, off), 6144);
}

VG_TEST(packing_by_breadth_reaches_the_peak_where_the_other_orders_leave_a_gap) {
    /* 7168 bytes live at once at most (at 7: 1536 + 1536 + 2048 + 2048). By size, by size x
     * lifetime and by lifetime, each at the lowest offsets or in the tightest gaps, these
     * take 7680; packed by breadth (the busiest moment each item meets), then lifetime, the
     * items of the busiest moments go side by side first and the height is the peak
     * (bench/cyclic_plan_model.py's ORDERS find the same). */
    vg_plan_item_t items[7] = {{1536, 6, 8}, {2048, 0, 5}, {1536, 5, 9}, {2048, 3, 8},
                               {2048, 7, 10}, {1536, 3, 5}, {512, 4, 7}};
    uint64_t off[7];
    CHECK_EQ(vg__plan_pack(items, 7, 12, off), 7168);
    CHECK_EQ(packed_apart(items, 7, off), 7168);
}

VG_TEST(under_a_top_the_tensor_that_did_not_fit_goes_first) {
    /* 4096 bytes live at once at most (at 4 and 5). Every greedy order of vg__plan_pack
     * leaves a gap that takes these to 5632. Under a top of 4096 (the fit lowering the
     * arena a page at a time), the packing that got furthest is tried again with the
     * tensor that did not fit placed first, and fits: the squeeze of vg__plan_fit_holes
     * (bench/RESULTS.md: cnn_train's arena a page lower). */
    vg_plan_item_t items[5] = {{1536, 2, 8}, {1536, 0, 4}, {512, 5, 8}, {2048, 4, 7},
                               {2560, 0, 2}};
    uint64_t off[5];
    CHECK_EQ(vg__plan_pack(items, 5, 10, off), 5632);
    CHECK_EQ(vg__plan_pack_under(items, 5, 10, 4096, off), 4096);
    CHECK_EQ(packed_apart(items, 5, off), 4096);
    CHECK_EQ(vg__plan_pack_under(items, 5, 10, 4095, off), UINT64_MAX); /* (below the peak) */
    CHECK_EQ(vg__plan_pack_under(items, 5, 10, 1ull << 20, off), 5632); /* (greedy fits) */
}

/* ---- holes: the arena's top pages given up (vg__plan_fit_holes) ------------------------ */

#define HOLE_AT (1ull << 40) /* (far above any arena offset: one space for the checks) */
#define HOLE_PAGE 4096ull

typedef struct {
    vg_plan_t *p;
    uint64_t req;
    uint64_t at[4096], size[4096]; /* each live request's place (UINT64_MAX: not placed) */
    uint64_t placed, in_holes, height, before;
    const vg_plan_hole_t *holes;
    int nholes;
    const uint64_t *paid; /* the pages the holes bridge (at most 64), ... */
    int npaid;
    uint64_t touched;     /* ... and those a place in a hole lay on, as bits */
    struct { uint64_t at, size, freed; } gone[64]; /* the last places in holes freed ... */
    uint64_t ngone, hot; /* ... and tensors put where one left less than 8 requests before */
    uint64_t lo, hi;     /* the lowest and highest byte of any place in a hole */
    uint64_t item_at[4096]; /* each item's place (+1; 0: not placed yet) ... */
    uint64_t item_first[4096], item_size[4096]; /* ... the request first placed there, size */
} placer_t;

/* Request req placed by the plan: it must not meet any place still live, and a place in a
 * hole must lie inside one. */
static void place(placer_t *c, uint64_t size) {
    bool hole = false;
    uint64_t r = c->req, gen;
    if (vg__plan_fit_due(c->p, r)) { /* (before its first place, as arena.c does) */
        CHECK_EQ(c->before, 0); /* (one plan) */
        vg__plan_following(c->p, &c->before, &gen);
        c->height = vg__plan_fit_holes(c->p, c->holes, (uint32_t)c->nholes, c->paid,
                                       (uint32_t)c->npaid, HOLE_PAGE);
        CHECK(!vg__plan_fit_due(c->p, r));
    }
    uint32_t item;
    uint64_t a = vg__plan_place(c->p, r, size, &hole, &item);
    c->at[r % 4096] = UINT64_MAX;
    if (a != VG_PLAN_NONE) {
        if (hole) {
            bool inside = false;
            for (int k = 0; k < c->nholes; k++)
                inside |= a >= c->holes[k].addr && a + size <= c->holes[k].addr + c->holes[k].size;
            CHECK_MSG(inside, "request %llu at %#llx: in no hole", (unsigned long long)r,
                      (unsigned long long)a);
            c->in_holes++;
            for (int k = 0; k < c->npaid; k++)
                if (a < c->paid[k] + HOLE_PAGE && c->paid[k] < a + size)
                    c->touched |= 1ull << k;
            for (uint64_t k = 0; k < c->ngone && k < 64; k++)
                c->hot += c->gone[k].freed + 8 > r && /* (VG_PLAN_COOL) */
                          a < c->gone[k].at + c->gone[k].size && c->gone[k].at < a + size;
            c->lo = c->lo && c->lo < a ? c->lo : a;
            c->hi = c->hi > a + size ? c->hi : a + size;
        } else {
            CHECK_MSG(a + size <= c->height, "request %llu above the height",
                      (unsigned long long)r);
        }
        for (uint64_t q = r > 4000 ? r - 4000 : 0; q < r; q++) {
            uint64_t b = c->at[q % 4096];
            if (b != UINT64_MAX)
                CHECK_MSG(a + size <= b || b + c->size[q % 4096] <= a,
                          "request %llu meets request %llu", (unsigned long long)r,
                          (unsigned long long)q);
        }
        c->at[r % 4096] = a, c->size[r % 4096] = size;
        c->placed++;
        if (item < 4096 && !c->item_at[item])
            c->item_at[item] = a + 1, c->item_first[item] = r, c->item_size[item] = size;
    }
    vg__plan_alloc(c->p, r, size);
    c->req++;
}

static void unplace(placer_t *c, uint64_t r, uint64_t size) {
    uint64_t a = c->at[r % 4096];
    if (a != UINT64_MAX && a >= HOLE_AT) {
        c->gone[c->ngone % 64].at = a, c->gone[c->ngone % 64].size = size;
        c->gone[c->ngone++ % 64].freed = c->req;
    }
    c->at[r % 4096] = UINT64_MAX;
    vg__plan_release(c->p, r, size);
}

/* The loop of the tests above (12 activations kept, temporaries, a loss, gradients). */
static void placed_step(placer_t *c) {
    uint64_t act[LAYERS];
    for (int i = 0; i < LAYERS; i++) {
        act[i] = c->req;
        place(c, 4096);
        for (int t = 0; t < TEMPS; t++) {
            uint64_t r = c->req, sz = 512 * (uint64_t)(t % 7 + 1);
            place(c, sz);
            unplace(c, r, sz);
        }
    }
    uint64_t loss = c->req;
    place(c, 1024);
    for (int i = LAYERS - 1; i >= 0; i--) {
        uint64_t g = c->req;
        place(c, 8192);
        unplace(c, act[i], 4096);
        unplace(c, g, 8192);
    }
    unplace(c, loss, 1024);
}

/* A loop of this step followed with these holes, some bridging the paid pages (each
 * placement checked by place()). */
static void follow_steps(placer_t *c, void (*step)(placer_t *), const vg_plan_hole_t *holes,
                         int nholes, const uint64_t *paid, int npaid) {
    memset(c, 0, sizeof *c);
    c->p = vg__plan_new(true);
    c->holes = holes, c->nholes = nholes;
    c->paid = paid, c->npaid = npaid;
    for (int k = 0; k < 4096; k++)
        c->at[k] = UINT64_MAX;
    for (int i = 0; i < PARAMS; i++)
        vg__plan_alloc(c->p, c->req++, 65536);
    for (int s = 0; s < 14; s++) {
        uint64_t first = c->req, placed = c->placed;
        step(c);
        if (s >= 10) /* (followed: every request placed) */
            CHECK_EQ(c->placed - placed, c->req - first);
    }
    CHECK(c->before > 0);
    /* Each tensor's successor (the hint of arena.c) is the one placed next at its address
     * (first placed in cycle order, all within one cycle), or the first one there after
     * the last; itself only where it is alone. */
    const uint32_t *succ = vg__plan_successors(c->p);
    uint32_t n = vg__plan_items(c->p);
    CHECK(succ != NULL && n > 0 && n <= 4096);
    for (uint32_t i = 0; succ && i < n && i < 4096; i++) {
        uint32_t next = i, lowest = i;
        for (uint32_t j = 0; j < n; j++) {
            if (c->item_at[j] != c->item_at[i])
                continue;
            if (c->item_first[j] < c->item_first[lowest])
                lowest = j;
            if (c->item_first[j] > c->item_first[i] &&
                (next == i || c->item_first[j] < c->item_first[next]))
                next = j;
        }
        uint32_t want = next != i ? next : lowest;
        CHECK_MSG(c->item_at[i] && succ[i] == want, "item %u at %#llx: successor %u, not %u",
                  i, (unsigned long long)c->item_at[i] - 1, succ[i], want);
    }
}

static void follow_with_holes(placer_t *c, const vg_plan_hole_t *holes, int nholes) {
    follow_steps(c, placed_step, holes, nholes, NULL, 0);
}

VG_TEST(a_plan_gives_up_its_top_pages_to_holes_and_no_two_live_places_meet) {
    static placer_t c;
    vg_plan_hole_t holes[2] = {{HOLE_AT, 3 * 4096}, {HOLE_AT + 65536, 4096 + 512}};
    follow_with_holes(&c, holes, 2);
    uint64_t before = c.before;
    /* The step's peak is 12 activations of 4096, the loss and a gradient: 58,368 bytes;
     * the holes hold 16,896 at once, so the arena can go down to 41,472, and a page lower
     * at a time it gives up at least three of its fifteen. */
    CHECK_EQ(before, LAYERS * 4096 + 1024 + 8192);
    CHECK_MSG(c.height <= before - 3 * HOLE_PAGE && c.height >= before - 16896,
              "height %llu", (unsigned long long)c.height);
    CHECK(c.in_holes > 0);
    vg__plan_free(c.p);
}

/* A fit's pages: the arena's, and the paid pages its places in holes lay on. */
static uint64_t fit_pages(const placer_t *c) {
    return (c->height + HOLE_PAGE - 1) / HOLE_PAGE + (uint64_t)__builtin_popcountll(c->touched);
}

VG_TEST(a_hole_bridging_free_pages_is_taken_where_it_costs_fewer_pages) {
    /* 3072 bytes free at the end of a kept page and at the start of another, two free
     * pages between (arena.c's bridge). Apart, the rests hold no activation (4096): at the
     * step's peak, 12 activations and a gradient (8192), the arena keeps 14 pages. As one
     * hole of 14,336 bytes, three activations and the loss fit there at once: the arena
     * needs 11 pages, and the bridge two, so the fit takes it. */
    static placer_t rests, bridged;
    static const vg_plan_hole_t apart[2] = {{HOLE_AT + 1024, 3072},
                                            {HOLE_AT + 3 * HOLE_PAGE, 3072}};
    static const vg_plan_hole_t one[1] = {{HOLE_AT + 1024, 3072 + 2 * HOLE_PAGE + 3072}};
    static const uint64_t paid[2] = {HOLE_AT + HOLE_PAGE, HOLE_AT + 2 * HOLE_PAGE};
    follow_with_holes(&rests, apart, 2);
    follow_steps(&bridged, placed_step, one, 1, paid, 2);
    CHECK_EQ(fit_pages(&rests), 14);
    CHECK_EQ(bridged.height, 11 * HOLE_PAGE);
    CHECK_EQ(bridged.touched, 3); /* (both paid pages) */
    CHECK_EQ(fit_pages(&bridged), 13);
    vg__plan_free(rests.p);
    vg__plan_free(bridged.p);
}

/* Four tensors of `wide` bytes live together, and 60 of 512 one at a time beside them. */
static void step_of_four(placer_t *c, uint64_t wide) {
    uint64_t big[4];
    for (int i = 0; i < 4; i++) {
        big[i] = c->req;
        place(c, wide);
    }
    for (int t = 0; t < 60; t++) {
        uint64_t r = c->req;
        place(c, 512);
        unplace(c, r, 512);
    }
    for (int i = 0; i < 4; i++)
        unplace(c, big[i], wide);
}

static void step_of_four_4096(placer_t *c) { step_of_four(c, 4096); }
static void step_of_four_6144(placer_t *c) { step_of_four(c, 6144); }

/* The loop of this step followed with 512-byte rests at the end of one kept page and the
 * start of another, `between` free pages in between: apart (rests), and bridged. */
static void rests_and_bridge(placer_t *rests, placer_t *bridged, void (*step)(placer_t *),
                             int between) {
    static vg_plan_hole_t apart[2], one[1];
    static uint64_t paid[2];
    apart[0] = (vg_plan_hole_t){HOLE_AT + HOLE_PAGE - 512, 512};
    apart[1] = (vg_plan_hole_t){HOLE_AT + (1 + (uint64_t)between) * HOLE_PAGE, 512};
    one[0] = (vg_plan_hole_t){HOLE_AT + HOLE_PAGE - 512, 1024 + (uint64_t)between * HOLE_PAGE};
    for (int k = 0; k < between; k++)
        paid[k] = HOLE_AT + (1 + (uint64_t)k) * HOLE_PAGE;
    follow_steps(rests, step, apart, 2, NULL, 0);
    follow_steps(bridged, step, one, 1, paid, between);
}

VG_TEST(a_hole_bridging_free_pages_is_left_where_they_cost_more_than_they_save) {
    /* The step needs six pages of the arena (four tensors of 6144); the rests take its
     * small tensors. One of 6144 in the bridge (9216 bytes) lowers the arena to five
     * pages, and touches both pages between: seven in all. Not taken. */
    static placer_t rests, bridged;
    rests_and_bridge(&rests, &bridged, step_of_four_6144, 2);
    CHECK_EQ(rests.height, 6 * HOLE_PAGE);
    CHECK(rests.in_holes > 0);
    CHECK_EQ(bridged.height, 6 * HOLE_PAGE);
    CHECK_EQ(bridged.touched, 0);
    vg__plan_free(rests.p);
    vg__plan_free(bridged.p);
}

VG_TEST(a_hole_bridging_a_free_page_is_left_where_it_saves_no_page) {
    /* Four tensors of 4096, a bridge of 512 + one page + 512: one tensor there lowers the
     * arena from four pages to three, and maps the page between. As many pages either way:
     * the one that maps no free page is kept. */
    static placer_t rests, bridged;
    rests_and_bridge(&rests, &bridged, step_of_four_4096, 1);
    CHECK_EQ(rests.height, 4 * HOLE_PAGE);
    CHECK_EQ(bridged.height, 4 * HOLE_PAGE);
    CHECK_EQ(bridged.touched, 0);
    vg__plan_free(rests.p);
    vg__plan_free(bridged.p);
}

VG_TEST(holes_too_small_for_any_request_change_nothing) {
    static placer_t c;
    vg_plan_hole_t holes[1] = {{HOLE_AT, 256}};
    follow_with_holes(&c, holes, 1);
    CHECK_EQ(c.height, c.before);
    CHECK_EQ(c.in_holes, 0);
    vg__plan_free(c.p);
}

/* The loop followed with one hole larger than all it ever needs. */
static placer_t *followed_in_one_large_hole(void) {
    static placer_t c;
    static const vg_plan_hole_t holes[1] = {{HOLE_AT, 1ull << 30}};
    follow_with_holes(&c, holes, 1);
    return &c;
}

VG_TEST(a_plan_that_fits_wholly_in_the_holes_needs_no_arena) {
    placer_t *c = followed_in_one_large_hole();
    CHECK_EQ(c->height, 0);
    CHECK_EQ(c->in_holes, c->placed);
    vg__plan_free(c->p);
}

VG_TEST(a_hole_place_just_freed_is_not_the_next_tensors_while_another_is_free) {
    /* Each temporary of the loop is freed before the next is made: at the lowest place,
     * every one would take the place the last one left, and one freed a request late
     * (another stream) would make the next a miss. With room to spare, none is put where a
     * tensor left less than VG_PLAN_COOL (8) requests before. */
    placer_t *c = followed_in_one_large_hole();
    CHECK(c->in_holes > 1000);
    CHECK_EQ(c->hot, 0);
    vg__plan_free(c->p);
}

VG_TEST(room_clear_of_the_places_planned_in_holes_is_found_past_them) {
    /* What general memory may give a miss (arena.c): the lowest room in a range that meets
     * no place the plan put in a hole, whichever tensor is live there now. */
    placer_t *c = followed_in_one_large_hole();
    CHECK(c->lo >= HOLE_AT && c->hi > c->lo);
    CHECK_EQ(vg__plan_clear_of_holes(c->p, HOLE_AT, HOLE_AT + (1ull << 30), 512), c->hi);
    CHECK_EQ(vg__plan_clear_of_holes(c->p, c->lo, c->hi, 512), VG_PLAN_NONE); /* (all taken) */
    CHECK_EQ(vg__plan_clear_of_holes(c->p, c->hi + 512, c->hi + 1024, 512), c->hi + 512);
    CHECK_EQ(vg__plan_clear_of_holes(c->p, c->hi, c->hi + 256, 512), VG_PLAN_NONE); /* small */
    /* From anywhere in and around the places, against every place planned in a hole. */
    for (uint64_t lo = c->lo - 1024; lo < c->hi + 1024; lo += 512)
        for (uint64_t size = 512; size <= 4096; size *= 2) {
            uint64_t want = lo;
            for (bool moved = true; moved;) {
                moved = false;
                for (uint32_t i = 0; i < 4096; i++) {
                    uint64_t a = c->item_at[i] - 1;
                    if (c->item_at[i] && a >= HOLE_AT && a < want + size &&
                        want < a + c->item_size[i])
                        want = a + c->item_size[i], moved = true;
                }
            }
            CHECK_MSG(vg__plan_clear_of_holes(c->p, lo, c->hi + 8192, size) == want,
                      "from %#llx, %llu bytes", (unsigned long long)lo,
                      (unsigned long long)size);
        }
    vg__plan_free(c->p);
}

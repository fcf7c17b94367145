/* tool.c — the probe's Compute Sanitizer subscriber: patches each module, prints each launch's accesses (run.sh). */
#include <sanitizer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct rec { unsigned long long count; unsigned long long addr[8]; unsigned size[8]; unsigned flags[8]; unsigned long long pc[8]; };
static void *dev;
static void cb(void *ud, Sanitizer_CallbackDomain dom, Sanitizer_CallbackId cbid, const void *data) {
    (void)ud;
    if (dom == SANITIZER_CB_DOMAIN_RESOURCE && cbid == SANITIZER_CBID_RESOURCE_MODULE_LOADED) {
        const Sanitizer_ResourceModuleData *m = data;
        SanitizerResult a = sanitizerAddPatchesFromFile(getenv("PROBE_PATCH"), m->context);
        SanitizerResult b = sanitizerPatchInstructions(SANITIZER_INSTRUCTION_GLOBAL_MEMORY_ACCESS, m->module, "probe_access");
        SanitizerResult c = sanitizerPatchModule(m->module);
        fprintf(stderr, "probe: module %p loaded (cubin %zu bytes): add %d patch %d module %d\n",
                (void *)m->module, (size_t)m->cubinSize, a, b, c);
    } else if (dom == SANITIZER_CB_DOMAIN_LAUNCH && cbid == SANITIZER_CBID_LAUNCH_BEGIN) {
        const Sanitizer_LaunchData *l = data;
        SanitizerResult a = SANITIZER_SUCCESS;
        if (!dev) a = sanitizerAlloc(l->context, &dev, sizeof(struct rec));
        SanitizerResult b = sanitizerMemset(dev, 0, sizeof(struct rec), l->hStream);
        SanitizerResult c = sanitizerSetCallbackData(l->function, dev);
        fprintf(stderr, "probe: launch begin %s: alloc %d memset %d setdata %d\n", l->functionName, a, b, c);
    } else if (dom == SANITIZER_CB_DOMAIN_LAUNCH && cbid == SANITIZER_CBID_LAUNCH_END) {
        const Sanitizer_LaunchData *l = data;
        struct rec h;
        memset(&h, 0, sizeof h);
        SanitizerResult a = sanitizerStreamSynchronize(l->hStream);
        SanitizerResult b = sanitizerMemcpyDeviceToHost(&h, dev, sizeof h, l->hStream);
        fprintf(stderr, "probe: launch end %s: sync %d copy %d: %llu accesses", l->functionName, a, b, h.count);
        for (int i = 0; i < 8 && i < (int)h.count; i++)
            fprintf(stderr, " [%#llx size %u flags %#x pc %#llx]", h.addr[i], h.size[i], h.flags[i], h.pc[i]);
        fprintf(stderr, "\n");
    }
}
static int started;
int InitializeInjection(void) {
    if (started++) return 1;
    Sanitizer_SubscriberHandle h;
    SanitizerResult a = sanitizerSubscribe(&h, cb, NULL);
    SanitizerResult b = sanitizerEnableDomain(1, h, SANITIZER_CB_DOMAIN_RESOURCE);
    SanitizerResult c = sanitizerEnableDomain(1, h, SANITIZER_CB_DOMAIN_LAUNCH);
    fprintf(stderr, "probe: subscribe %d, enable %d %d\n", a, b, c);
    return 1;
}
__attribute__((constructor)) static void ctor(void) { if (getenv("PROBE_CTOR")) InitializeInjection(); }

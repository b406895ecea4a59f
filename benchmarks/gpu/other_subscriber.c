/* Another profiler attached to the process, as far as CUPTI can tell: a shared object that
 * subscribes to CUPTI when it is loaded (LD_PRELOAD). benchmarks/gpu/cupti_refusal.sh runs
 * tprobe profile under it to show what a refused subscription looks like. */
#include <cupti.h>
#include <stdio.h>

static void CUPTIAPI ignore(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void* data) {
  (void)userdata;
  (void)domain;
  (void)cbid;
  (void)data;
}

__attribute__((constructor)) static void attach(void) {
  CUpti_SubscriberHandle handle;
  CUptiResult rc = cuptiSubscribe(&handle, ignore, NULL);
  fprintf(stderr, "[other subscriber] cuptiSubscribe -> %d\n", (int)rc);
}

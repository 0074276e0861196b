/*
 * DiSNI's NativeAffinity: the calling thread's CPU affinity as a 64-bit mask (CPU n is bit n; CPUs from 64 on
 * cannot be named). DiSNI's RdmaCqProcessor pins its polling thread with it.
 */
#include "gs_disni.h"
#include "jni/com_ibm_disni_util_NativeAffinity.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>

JNIEXPORT void JNICALL Java_com_ibm_disni_util_NativeAffinity__1setAffinity(JNIEnv *env, jclass cls, jlong mask)
{
	GS_COUNT(setAffinity);
	(void) cls;
	cpu_set_t set;
	CPU_ZERO(&set);
	for (int cpu = 0; cpu < 64; cpu++) {
		if (((uint64_t) mask >> cpu) & 1)
			CPU_SET(cpu, &set);
	}
	/* pid 0: the calling thread */
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		char message[160];
		snprintf(message, sizeof message, "sched_setaffinity(mask 0x%llx) failed, errno %d",
			 (unsigned long long) mask, errno);
		gs_throw(env, "java/lang/IllegalArgumentException", message);
	}
}

JNIEXPORT jlong JNICALL Java_com_ibm_disni_util_NativeAffinity__1getAffinity(JNIEnv *env, jclass cls)
{
	GS_COUNT(getAffinity);
	(void) env;
	(void) cls;
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof set, &set) != 0)
		return 0;
	uint64_t mask = 0;
	for (int cpu = 0; cpu < 64; cpu++) {
		if (CPU_ISSET(cpu, &set))
			mask |= (uint64_t) 1 << cpu;
	}
	return (jlong) mask;
}

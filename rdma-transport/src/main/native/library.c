/*
 * Loading, version, struct sizes, error helpers, and gradsync's own natives (io.gradsync.rdma.NativeLibrary).
 *
 * How DiSNI finds this library without java.library.path: gradsync extracts it from its jar and System.load()s
 * it. JNI_OnLoad then re-opens the library with RTLD_GLOBAL, which puts its symbols, JNI_OnLoad_disni included,
 * into the process's global scope. When DiSNI later calls System.loadLibrary("disni"), the JDK first looks for
 * JNI_OnLoad_disni in the process (JEP 178, statically linked libraries), finds it, treats "disni" as a built-in
 * library, and resolves DiSNI's native methods by name in the process: to the functions below.
 */
#include "gs_disni.h"
#include "jni/com_ibm_disni_verbs_impl_NativeDispatcher.h"

#include <dlfcn.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* glibc 2.34 moved dlopen, dladdr and dlerror from libdl into libc under the new version GLIBC_2.34; binding
 * them to their original x86-64 version keeps the library loadable on glibc older than 2.34 (RHEL 8, Ubuntu
 * 20.04), where libdl.so.2 defines them (the Makefile keeps it NEEDED); see rdma-transport/README.md, glibc baseline. */
#if defined(__x86_64__) && defined(__GLIBC__)
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
#endif

/* The RTLD_GLOBAL reference to ourselves; never closed, which also pins the library in memory. */
static void *global_self;
static int global_error_set;
static char global_error[256];

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved)
{
	(void) vm;
	(void) reserved;
	Dl_info info;
	if (dladdr((void *) &JNI_OnLoad, &info) == 0 || info.dli_fname == NULL) {
		snprintf(global_error, sizeof global_error, "dladdr found no file for libdisni");
		global_error_set = 1;
		return JNI_VERSION_1_8;
	}
	/* RTLD_NOLOAD: the library is loaded (we are running in it), only its scope changes to global. */
	global_self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL);
	if (global_self == NULL) {
		const char *why = dlerror();
		snprintf(global_error, sizeof global_error, "dlopen(%s, RTLD_GLOBAL): %s", info.dli_fname,
			 why != NULL ? why : "unknown error");
		global_error_set = 1;
	}
	return JNI_VERSION_1_8;
}

/* What makes System.loadLibrary("disni") see a built-in library. JDK 8+ requires at least 1.8 here. */
JNIEXPORT jint JNICALL JNI_OnLoad_disni(JavaVM *vm, void *reserved)
{
	(void) vm;
	(void) reserved;
	return JNI_VERSION_1_8;
}

void gs_throw(JNIEnv *env, const char *class_name, const char *message)
{
	if ((*env)->ExceptionCheck(env))
		return;
	jclass cls = (*env)->FindClass(env, class_name);
	if (cls != NULL)
		(*env)->ThrowNew(env, cls, message);
}

void gs_throw_io(JNIEnv *env, const char *what, int err, const char *hint)
{
	char text[128];
	char message[512];
	const char *reason = strerror_r(err, text, sizeof text);
	snprintf(message, sizeof message, "%s: %s (errno %d)%s", what, reason, err, hint != NULL ? hint : "");
	gs_throw(env, "java/io/IOException", message);
}

/* ---- version and the sizes DiSNI's NativeDispatcher constructor checks against its Java constants ---- */

JNIEXPORT jint JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1getVersion(JNIEnv *env, jobject self)
{
	GS_COUNT(getVersion);
	(void) env;
	(void) self;
	return GS_JVERBS_VERSION;
}

/*
 * The socket-address buffer size: _getSrcAddr/_getDstAddr write a struct sockaddr_in or sockaddr_in6, and
 * _bindAddr/_resolveAddr read one, so DiSNI's buffers must hold the larger (DiSNI's SockAddrIn.CSIZE is 28).
 */
JNIEXPORT jint JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1getSockAddrInSize(JNIEnv *env,
											    jobject self)
{
	GS_COUNT(getSockAddrInSize);
	(void) env;
	(void) self;
	_Static_assert(sizeof(struct sockaddr_in6) == 28, "sockaddr_in6");
	return (jint) sizeof(struct sockaddr_in6);
}

JNIEXPORT jint JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1getIbvRecvWRSize(JNIEnv *env,
											   jobject self)
{
	GS_COUNT(getIbvRecvWRSize);
	(void) env;
	(void) self;
	return (jint) sizeof(struct gs_recv_wr);
}

JNIEXPORT jint JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1getIbvSendWRSize(JNIEnv *env,
											   jobject self)
{
	GS_COUNT(getIbvSendWRSize);
	(void) env;
	(void) self;
	return (jint) sizeof(struct gs_send_wr);
}

JNIEXPORT jint JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1getIbvSgeSize(JNIEnv *env, jobject self)
{
	GS_COUNT(getIbvSgeSize);
	(void) env;
	(void) self;
	return (jint) sizeof(struct gs_sge);
}

JNIEXPORT jint JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1getIbvWCSize(JNIEnv *env, jobject self)
{
	GS_COUNT(getIbvWCSize);
	(void) env;
	(void) self;
	return (jint) sizeof(struct gs_wc);
}

JNIEXPORT jint JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1getRemoteAddressOffset(JNIEnv *env,
												 jobject self)
{
	GS_COUNT(getRemoteAddressOffset);
	(void) env;
	(void) self;
	return (jint) offsetof(struct gs_send_wr, remote_addr);
}

JNIEXPORT jint JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1getRKeyOffset(JNIEnv *env, jobject self)
{
	GS_COUNT(getRKeyOffset);
	(void) env;
	(void) self;
	return (jint) offsetof(struct gs_send_wr, rkey);
}

/* ---- gradsync's own natives: io.gradsync.rdma.NativeLibrary ---- */

/* null when JNI_OnLoad made the library global, else why it could not. */
JNIEXPORT jstring JNICALL Java_io_gradsync_rdma_NativeLibrary_globalScopeError0(JNIEnv *env, jclass cls)
{
	(void) cls;
	if (global_self != NULL)
		return NULL;
	return (*env)->NewStringUTF(env, global_error_set ? global_error : "JNI_OnLoad did not run");
}

/*
 * The names of the RDMA devices ibv_get_device_list sees; an empty array when there are none. When the list
 * cannot be read at all (no kernel support), throws IOException naming errno.
 */
JNIEXPORT jobjectArray JNICALL Java_io_gradsync_rdma_NativeLibrary_deviceNames0(JNIEnv *env, jclass cls)
{
	(void) cls;
	int count = 0;
	errno = 0;
	struct ibv_device **list = ibv_get_device_list(&count);
	if (list == NULL) {
		int err = errno != 0 ? errno : ENODEV;
		gs_throw_io(env, "ibv_get_device_list", err, NULL);
		return NULL;
	}
	jclass string_class = (*env)->FindClass(env, "java/lang/String");
	jobjectArray names = string_class != NULL ? (*env)->NewObjectArray(env, count, string_class, NULL) : NULL;
	for (int i = 0; names != NULL && i < count; i++) {
		jstring name = (*env)->NewStringUTF(env, ibv_get_device_name(list[i]));
		if (name == NULL) {
			names = NULL;
			break;
		}
		(*env)->SetObjectArrayElement(env, names, i, name);
		(*env)->DeleteLocalRef(env, name);
	}
	ibv_free_device_list(list);
	return names;
}

/* ---- call counting, for the tests that check every DiSNI native is exercised ---- */

int gs_call_counting;
uint64_t gs_call_counts[GS_NATIVE_COUNT];

static const char *const native_names[GS_NATIVE_COUNT] = {
#define GS_NAME(name) "_" #name,
	GS_DISNI_NATIVES(GS_NAME)
#undef GS_NAME
};

JNIEXPORT void JNICALL Java_io_gradsync_rdma_NativeLibrary_countCalls0(JNIEnv *env, jclass cls, jboolean on)
{
	(void) env;
	(void) cls;
	__atomic_store_n(&gs_call_counting, on ? 1 : 0, __ATOMIC_RELAXED);
}

/* The counted natives' Java names (_createEventChannel, ...), in the order of callCounts0. */
JNIEXPORT jobjectArray JNICALL Java_io_gradsync_rdma_NativeLibrary_countedNatives0(JNIEnv *env, jclass cls)
{
	(void) cls;
	jclass string_class = (*env)->FindClass(env, "java/lang/String");
	if (string_class == NULL)
		return NULL;
	jobjectArray names = (*env)->NewObjectArray(env, GS_NATIVE_COUNT, string_class, NULL);
	for (int i = 0; names != NULL && i < GS_NATIVE_COUNT; i++) {
		jstring name = (*env)->NewStringUTF(env, native_names[i]);
		if (name == NULL)
			return NULL;
		(*env)->SetObjectArrayElement(env, names, i, name);
		(*env)->DeleteLocalRef(env, name);
	}
	return names;
}

JNIEXPORT jlongArray JNICALL Java_io_gradsync_rdma_NativeLibrary_callCounts0(JNIEnv *env, jclass cls)
{
	(void) cls;
	jlong counts[GS_NATIVE_COUNT];
	for (int i = 0; i < GS_NATIVE_COUNT; i++)
		counts[i] = (jlong) __atomic_load_n(&gs_call_counts[i], __ATOMIC_RELAXED);
	jlongArray array = (*env)->NewLongArray(env, GS_NATIVE_COUNT);
	if (array != NULL)
		(*env)->SetLongArrayRegion(env, array, 0, GS_NATIVE_COUNT, counts);
	return array;
}

/*
 * DiSNI reads direct buffers' addresses by casting to sun.nio.ch.DirectBuffer (MemoryUtils.getAddress), which
 * java.base exports to no one since JDK 16. JNI calls are not subject to Java's access checks, so this calls
 * java.base's Module.implAddExports(package, module) for DiSNI's module: the effect of the command-line option
 * --add-exports java.base/sun.nio.ch=<DiSNI's module>. False when the JDK has no such method or it failed.
 */
JNIEXPORT jboolean JNICALL Java_io_gradsync_rdma_NativeLibrary_exportPackage0(JNIEnv *env, jclass cls,
									     jobject from_module, jstring package,
									     jobject to_module)
{
	(void) cls;
	jclass module_class = (*env)->FindClass(env, "java/lang/Module");
	if (module_class == NULL) {
		(*env)->ExceptionClear(env);
		return JNI_FALSE;
	}
	jmethodID add_exports =
		(*env)->GetMethodID(env, module_class, "implAddExports", "(Ljava/lang/String;Ljava/lang/Module;)V");
	if (add_exports == NULL) {
		(*env)->ExceptionClear(env);
		return JNI_FALSE;
	}
	(*env)->CallVoidMethod(env, from_module, add_exports, package, to_module);
	if ((*env)->ExceptionCheck(env)) {
		(*env)->ExceptionClear(env);
		return JNI_FALSE;
	}
	return JNI_TRUE;
}

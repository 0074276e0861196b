/*
 * gradsync's implementation of DiSNI's native contract (libdisni).
 *
 * DiSNI 2.1 (com.ibm.disni:disni) is Java only; its classes NativeDispatcher and NativeAffinity declare 50 native
 * methods and load "disni" with System.loadLibrary. This library implements them against libibverbs and
 * librdmacm (rdma-core). Handles passed to and from Java ("objId" in DiSNI) are the rdma-core object pointers
 * (struct rdma_event_channel *, struct rdma_cm_id *, struct ibv_context *, struct ibv_pd *, ...).
 *
 * Work requests, scatter/gather entries and work completions cross the boundary as records in direct buffers
 * whose layout DiSNI's Java code fixes (NatIbvSendWR, NatIbvRecvWR, NatIbvSge, IbvWC and the call classes that
 * serialise them). The records are described here as our own wire structs; the natives convert them to and from
 * rdma-core's structs field by field, so the layout never depends on the rdma-core version's struct ibv_send_wr
 * (which is longer than DiSNI's 72-byte record since rdma-core grew it).
 */
#ifndef GS_DISNI_H
#define GS_DISNI_H

#include <jni.h>
#include <stddef.h>
#include <stdint.h>

/* NativeDispatcher refuses a library whose _getVersion() is not this. */
#define GS_JVERBS_VERSION 32

/* A jlong handle to a pointer and back. */
#define GS_PTR(type, handle) ((type *) (uintptr_t) (handle))
#define GS_HANDLE(ptr) ((jlong) (uintptr_t) (ptr))

/*
 * DiSNI's scatter/gather record (NatIbvSge.writeBack, NatPostRecvCall.setWrList): 16 bytes.
 */
struct gs_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/*
 * DiSNI's receive work request record (NatIbvRecvWR.writeBack): 32 bytes. next and sg_list are absolute
 * addresses inside the same direct buffer; next is 0 on the last record.
 */
struct gs_recv_wr {
	uint64_t wr_id;
	uint64_t next;
	uint64_t sg_list;
	int32_t num_sge;
	uint32_t unused;
};

/*
 * DiSNI's send work request record (NatIbvSendWR.writeBack, NatRdma.writeBack): 72 bytes. Only the RDMA part
 * of the work-request union is written by DiSNI (remote_addr at 40, rkey at 48: reported by
 * _getRemoteAddressOffset and _getRKeyOffset); the atomic and UD parts have no place in it.
 */
struct gs_send_wr {
	uint64_t wr_id;
	uint64_t next;
	uint64_t sg_list;
	int32_t num_sge;
	int32_t opcode;
	int32_t send_flags;
	uint32_t imm_data; /* the Java int's bits, passed through unchanged */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t reserved;
	uint8_t unused[16];
};

/*
 * DiSNI's work completion record (NatPollCqCall.update): 48 bytes.
 */
struct gs_wc {
	uint64_t wr_id;
	int32_t status;
	int32_t opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data;
	uint32_t qp_num;
	uint32_t src_qp;
	int32_t wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
	uint8_t unused[2];
};

_Static_assert(sizeof(struct gs_sge) == 16, "DiSNI NatIbvSge.CSIZE");
_Static_assert(sizeof(struct gs_recv_wr) == 32, "DiSNI NatIbvRecvWR.CSIZE");
_Static_assert(sizeof(struct gs_send_wr) == 72, "DiSNI NatIbvSendWR.CSIZE");
_Static_assert(offsetof(struct gs_send_wr, send_flags) == 32, "DiSNI NatIbvSendWR.SENDFLAGS_OFFSET");
_Static_assert(offsetof(struct gs_send_wr, remote_addr) == 40, "DiSNI NatIbvSendWR.REMOTEADDR_OFFSET");
_Static_assert(offsetof(struct gs_send_wr, rkey) == 48, "DiSNI NatIbvSendWR.RKEY_OFFSET");
_Static_assert(sizeof(struct gs_wc) == 48, "DiSNI IbvWC.CSIZE");
_Static_assert(offsetof(struct gs_wc, pkey_index) == 40, "IbvWC pkey_index");

/*
 * Every native DiSNI declares, for call counting: the tests turn counting on and check that each was called.
 * Off (the default) it costs one predictable branch per call.
 */
#define GS_DISNI_NATIVES(X)                                                                                    \
	X(createEventChannel) X(createId) X(createQP) X(bindAddr) X(listen) X(resolveAddr) X(resolveRoute)     \
	X(getCmEvent) X(connect) X(accept) X(ackCmEvent) X(disconnect) X(destroyEventChannel) X(destroyCmId)   \
	X(destroyQP) X(getSrcAddr) X(getDstAddr) X(destroyEp) X(allocPd) X(createCompChannel) X(createCQ)      \
	X(modifyQP) X(regMr) X(queryOdpSupport) X(expPrefetchMr) X(deregMr) X(postSend) X(postRecv)           \
	X(getCqEvent) X(pollCQ) X(reqNotifyCQ) X(ackCqEvent) X(destroyCompChannel) X(deallocPd) X(destroyCQ)   \
	X(getContext) X(getQpNum) X(getContextFd) X(getContextNumCompVectors) X(getPdHandle)                 \
	X(getSockAddrInSize) X(getIbvRecvWRSize) X(getIbvSendWRSize) X(getIbvSgeSize) X(getIbvWCSize)         \
	X(getRemoteAddressOffset) X(getRKeyOffset) X(getVersion) X(setAffinity) X(getAffinity)

enum gs_native {
#define GS_ENUM(name) GS_NATIVE_##name,
	GS_DISNI_NATIVES(GS_ENUM)
#undef GS_ENUM
	GS_NATIVE_COUNT
};
_Static_assert(GS_NATIVE_COUNT == 50, "DiSNI 2.1 declares 48 natives in NativeDispatcher and 2 in NativeAffinity");

extern int gs_call_counting;
extern uint64_t gs_call_counts[GS_NATIVE_COUNT];
#define GS_COUNT(name)                                                                                         \
	do {                                                                                                   \
		if (__builtin_expect(__atomic_load_n(&gs_call_counting, __ATOMIC_RELAXED), 0))                 \
			__atomic_fetch_add(&gs_call_counts[GS_NATIVE_##name], 1, __ATOMIC_RELAXED);          \
	} while (0)

/* Throws java.io.IOException("<what>: <strerror(err)> (errno <err>)<hint>"). */
void gs_throw_io(JNIEnv *env, const char *what, int err, const char *hint);
/* Throws the given class with a plain message. */
void gs_throw(JNIEnv *env, const char *class_name, const char *message);

/* Called by _destroyCQ once a CQ is gone: destroys its completion channel if DiSNI already asked to. */
void gs_comp_channel_release(void *channel);

#endif

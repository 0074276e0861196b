/*
 * The verbs half of DiSNI's NativeDispatcher: protection domains, completion channels and queues, memory
 * regions, posting work requests and polling completions, and field look-ups on verbs objects.
 */
#include "gs_disni.h"
#include "jni/com_ibm_disni_verbs_impl_NativeDispatcher.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NATIVE(name) JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1##name

/* A list of work requests longer than this is refused rather than followed (a cycle or a stray pointer). */
#define GS_MAX_WR_LIST 65536
/* Work requests and SGEs converted on the stack; longer lists use the heap. */
#define GS_STACK_WR 32
#define GS_STACK_SGE 128
/* Completions converted per ibv_poll_cq call. */
#define GS_POLL_BATCH 32

JNIEXPORT jlong NATIVE(allocPd)(JNIEnv *env, jobject self, jlong context)
{
	GS_COUNT(allocPd);
	(void) self;
	struct ibv_pd *pd = ibv_alloc_pd(GS_PTR(struct ibv_context, context));
	if (pd == NULL) {
		gs_throw_io(env, "ibv_alloc_pd", errno != 0 ? errno : ENOMEM, NULL);
		return -1;
	}
	return GS_HANDLE(pd);
}

JNIEXPORT jint NATIVE(deallocPd)(JNIEnv *env, jobject self, jlong pd)
{
	GS_COUNT(deallocPd);
	(void) env;
	(void) self;
	return -ibv_dealloc_pd(GS_PTR(struct ibv_pd, pd));
}

JNIEXPORT jlong NATIVE(createCompChannel)(JNIEnv *env, jobject self, jlong context)
{
	GS_COUNT(createCompChannel);
	(void) self;
	struct ibv_comp_channel *channel = ibv_create_comp_channel(GS_PTR(struct ibv_context, context));
	if (channel == NULL) {
		gs_throw_io(env, "ibv_create_comp_channel", errno != 0 ? errno : ENOMEM, NULL);
		return -1;
	}
	return GS_HANDLE(channel);
}

/*
 * Completion channels DiSNI asked to destroy while a CQ still used them. DiSNI's RdmaCqProvider.close destroys
 * the channel before the CQ, which ibv_destroy_comp_channel refuses (EBUSY); the channel is destroyed instead
 * when the last CQ on it goes (gs_comp_channel_release, from _destroyCQ).
 */
struct deferred_channel {
	struct ibv_comp_channel *channel;
	struct deferred_channel *next;
};
static pthread_mutex_t deferred_lock = PTHREAD_MUTEX_INITIALIZER;
static struct deferred_channel *deferred_channels;

JNIEXPORT jint NATIVE(destroyCompChannel)(JNIEnv *env, jobject self, jlong handle)
{
	GS_COUNT(destroyCompChannel);
	(void) env;
	(void) self;
	struct ibv_comp_channel *channel = GS_PTR(struct ibv_comp_channel, handle);
	pthread_mutex_lock(&deferred_lock);
	int err = ibv_destroy_comp_channel(channel);
	if (err == EBUSY) {
		struct deferred_channel *entry = malloc(sizeof *entry);
		if (entry != NULL) {
			entry->channel = channel;
			entry->next = deferred_channels;
			deferred_channels = entry;
			err = 0;
		}
	}
	pthread_mutex_unlock(&deferred_lock);
	return -err;
}

void gs_comp_channel_release(void *handle)
{
	struct ibv_comp_channel *channel = handle;
	pthread_mutex_lock(&deferred_lock);
	for (struct deferred_channel **at = &deferred_channels; *at != NULL; at = &(*at)->next) {
		if ((*at)->channel == channel) {
			if (ibv_destroy_comp_channel(channel) == 0) {
				struct deferred_channel *gone = *at;
				*at = gone->next;
				free(gone);
			}
			break;
		}
	}
	pthread_mutex_unlock(&deferred_lock);
}

JNIEXPORT jlong NATIVE(createCQ)(JNIEnv *env, jobject self, jlong context, jlong channel, jint ncqe,
				 jint comp_vector)
{
	GS_COUNT(createCQ);
	(void) self;
	struct ibv_cq *cq = ibv_create_cq(GS_PTR(struct ibv_context, context), ncqe, NULL,
					  GS_PTR(struct ibv_comp_channel, channel), comp_vector);
	if (cq == NULL) {
		gs_throw_io(env, "ibv_create_cq", errno != 0 ? errno : ENOMEM, NULL);
		return -1;
	}
	return GS_HANDLE(cq);
}

JNIEXPORT jint NATIVE(destroyCQ)(JNIEnv *env, jobject self, jlong handle)
{
	GS_COUNT(destroyCQ);
	(void) env;
	(void) self;
	struct ibv_cq *cq = GS_PTR(struct ibv_cq, handle);
	struct ibv_comp_channel *channel = cq->channel;
	int err = ibv_destroy_cq(cq);
	if (err == 0 && channel != NULL)
		gs_comp_channel_release(channel);
	return -err;
}

/*
 * DiSNI passes no attributes (RdmaVerbsNat.modifyQP always sends 0): the RDMA CM moves RC QPs through their
 * states itself. With no attributes this modifies nothing and returns the QP's current state (IbvQP.IBV_QPS_*).
 */
JNIEXPORT jint NATIVE(modifyQP)(JNIEnv *env, jobject self, jlong handle, jlong attributes)
{
	GS_COUNT(modifyQP);
	(void) self;
	if (attributes != 0) {
		gs_throw(env, "java/io/IOException",
			 "modifyQP: DiSNI 2.1 defines no attribute layout; only a null attribute pointer is accepted");
		return -1;
	}
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	int err = ibv_query_qp(GS_PTR(struct ibv_qp, handle), &attr, IBV_QP_STATE, &init);
	if (err != 0) {
		gs_throw_io(env, "ibv_query_qp", err, NULL);
		return -1;
	}
	return (jint) attr.qp_state;
}

JNIEXPORT jlong NATIVE(regMr)(JNIEnv *env, jobject self, jlong pd, jlong address, jint length, jint access,
			      jlong lkey_out, jlong rkey_out, jlong handle_out)
{
	GS_COUNT(regMr);
	(void) self;
	if (length < 0) {
		gs_throw_io(env, "ibv_reg_mr: negative length", EINVAL, NULL);
		return -1;
	}
	struct ibv_mr *mr = ibv_reg_mr(GS_PTR(struct ibv_pd, pd), GS_PTR(void, address), (size_t) length, access);
	if (mr == NULL) {
		int err = errno != 0 ? errno : EINVAL;
		gs_throw_io(env, "ibv_reg_mr", err,
			    err == ENOMEM || err == EPERM ? " (is RLIMIT_MEMLOCK, ulimit -l, large enough?)" : NULL);
		return -1;
	}
	*GS_PTR(uint32_t, lkey_out) = mr->lkey;
	*GS_PTR(uint32_t, rkey_out) = mr->rkey;
	*GS_PTR(uint32_t, handle_out) = mr->handle;
	return GS_HANDLE(mr);
}

JNIEXPORT void NATIVE(deregMr)(JNIEnv *env, jobject self, jlong mr)
{
	GS_COUNT(deregMr);
	(void) self;
	int err = ibv_dereg_mr(GS_PTR(struct ibv_mr, mr));
	if (err != 0)
		gs_throw_io(env, "ibv_dereg_mr", err, NULL);
}

/* The device's RC on-demand-paging capabilities (IBV_ODP_SUPPORT_*) when it supports ODP at all, else -1. */
JNIEXPORT jint NATIVE(queryOdpSupport)(JNIEnv *env, jobject self, jlong context)
{
	GS_COUNT(queryOdpSupport);
	(void) env;
	(void) self;
	struct ibv_device_attr_ex attr;
	memset(&attr, 0, sizeof attr);
	if (ibv_query_device_ex(GS_PTR(struct ibv_context, context), NULL, &attr) != 0)
		return -1;
	if ((attr.odp_caps.general_caps & IBV_ODP_SUPPORT) == 0)
		return -1;
	return (jint) attr.odp_caps.per_transport_caps.rc_odp_caps;
}

/*
 * Prefetches [address, address + length) of an on-demand-paging MR (ibv_advise_mr, the upstream successor of
 * the experimental verb DiSNI was written for). Returns 0, or the error number as DiSNI documents it
 * (EOPNOTSUPP/ENOSYS where the provider cannot prefetch, EFAULT out of range, EINVAL bad MR).
 */
JNIEXPORT jint NATIVE(expPrefetchMr)(JNIEnv *env, jobject self, jlong handle, jlong address, jint length)
{
	GS_COUNT(expPrefetchMr);
	(void) env;
	(void) self;
	struct ibv_mr *mr = GS_PTR(struct ibv_mr, handle);
	if (length < 0)
		return EINVAL;
	struct ibv_sge sge = { .addr = (uint64_t) address, .length = (uint32_t) length, .lkey = mr->lkey };
	return ibv_advise_mr(mr->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
}

/* ---- posting work requests ---- */

static int count_send_list(jlong head, int *wrs, int *sges)
{
	*wrs = 0;
	*sges = 0;
	for (uint64_t at = (uint64_t) head; at != 0;) {
		const struct gs_send_wr *wr = (const struct gs_send_wr *) (uintptr_t) at;
		if (++*wrs > GS_MAX_WR_LIST || wr->num_sge < 0)
			return EINVAL;
		*sges += wr->num_sge;
		at = wr->next;
	}
	return 0;
}

JNIEXPORT void NATIVE(postSend)(JNIEnv *env, jobject self, jlong qp, jlong list)
{
	GS_COUNT(postSend);
	(void) self;
	int nwr, nsge;
	if (list == 0 || count_send_list(list, &nwr, &nsge) != 0) {
		gs_throw_io(env, "ibv_post_send: malformed work request list", EINVAL, NULL);
		return;
	}
	struct ibv_send_wr stack_wr[GS_STACK_WR];
	struct ibv_sge stack_sge[GS_STACK_SGE];
	struct ibv_send_wr *wrs = nwr <= GS_STACK_WR ? stack_wr : calloc((size_t) nwr, sizeof *wrs);
	struct ibv_sge *sges = nsge <= GS_STACK_SGE ? stack_sge : calloc((size_t) nsge, sizeof *sges);
	if (wrs == NULL || sges == NULL) {
		gs_throw_io(env, "ibv_post_send", ENOMEM, NULL);
		goto out;
	}
	const struct gs_send_wr *in = GS_PTR(const struct gs_send_wr, list);
	struct ibv_sge *sge_at = sges;
	for (int i = 0; i < nwr; i++, in = (const struct gs_send_wr *) (uintptr_t) in->next) {
		struct ibv_send_wr *wr = &wrs[i];
		memset(wr, 0, sizeof *wr);
		wr->wr_id = in->wr_id;
		wr->next = i + 1 < nwr ? &wrs[i + 1] : NULL;
		wr->num_sge = in->num_sge;
		wr->sg_list = in->num_sge > 0 ? sge_at : NULL;
		const struct gs_sge *sge_in = (const struct gs_sge *) (uintptr_t) in->sg_list;
		for (int s = 0; s < in->num_sge; s++, sge_at++) {
			sge_at->addr = sge_in[s].addr;
			sge_at->length = sge_in[s].length;
			sge_at->lkey = sge_in[s].lkey;
		}
		wr->opcode = (enum ibv_wr_opcode) in->opcode;
		wr->send_flags = (unsigned int) in->send_flags;
		wr->imm_data = in->imm_data;
		switch (in->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
		case IBV_WR_RDMA_READ:
			wr->wr.rdma.remote_addr = in->remote_addr;
			wr->wr.rdma.rkey = in->rkey;
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			gs_throw(env, "java/io/IOException",
				 "ibv_post_send: atomic work requests cannot be posted through DiSNI 2.1, whose work "
				 "request record has no compare/add/swap operands");
			goto out;
		default:
			break;
		}
	}
	struct ibv_send_wr *bad = NULL;
	int err = ibv_post_send(GS_PTR(struct ibv_qp, qp), wrs, &bad);
	if (err != 0) {
		char what[96];
		snprintf(what, sizeof what, "ibv_post_send (work request %ld of %d)",
			 bad != NULL ? (long) (bad - wrs) : -1L, nwr);
		gs_throw_io(env, what, err, NULL);
	}
out:
	if (wrs != stack_wr)
		free(wrs);
	if (sges != stack_sge)
		free(sges);
}

static int count_recv_list(jlong head, int *wrs, int *sges)
{
	*wrs = 0;
	*sges = 0;
	for (uint64_t at = (uint64_t) head; at != 0;) {
		const struct gs_recv_wr *wr = (const struct gs_recv_wr *) (uintptr_t) at;
		if (++*wrs > GS_MAX_WR_LIST || wr->num_sge < 0)
			return EINVAL;
		*sges += wr->num_sge;
		at = wr->next;
	}
	return 0;
}

JNIEXPORT void NATIVE(postRecv)(JNIEnv *env, jobject self, jlong qp, jlong list)
{
	GS_COUNT(postRecv);
	(void) self;
	int nwr, nsge;
	if (list == 0 || count_recv_list(list, &nwr, &nsge) != 0) {
		gs_throw_io(env, "ibv_post_recv: malformed work request list", EINVAL, NULL);
		return;
	}
	struct ibv_recv_wr stack_wr[GS_STACK_WR];
	struct ibv_sge stack_sge[GS_STACK_SGE];
	struct ibv_recv_wr *wrs = nwr <= GS_STACK_WR ? stack_wr : calloc((size_t) nwr, sizeof *wrs);
	struct ibv_sge *sges = nsge <= GS_STACK_SGE ? stack_sge : calloc((size_t) nsge, sizeof *sges);
	if (wrs == NULL || sges == NULL) {
		gs_throw_io(env, "ibv_post_recv", ENOMEM, NULL);
		goto out;
	}
	const struct gs_recv_wr *in = GS_PTR(const struct gs_recv_wr, list);
	struct ibv_sge *sge_at = sges;
	for (int i = 0; i < nwr; i++, in = (const struct gs_recv_wr *) (uintptr_t) in->next) {
		struct ibv_recv_wr *wr = &wrs[i];
		wr->wr_id = in->wr_id;
		wr->next = i + 1 < nwr ? &wrs[i + 1] : NULL;
		wr->num_sge = in->num_sge;
		/* with no SGEs DiSNI's sg_list points at the buffer start; it is not read */
		wr->sg_list = in->num_sge > 0 ? sge_at : NULL;
		const struct gs_sge *sge_in = (const struct gs_sge *) (uintptr_t) in->sg_list;
		for (int s = 0; s < in->num_sge; s++, sge_at++) {
			sge_at->addr = sge_in[s].addr;
			sge_at->length = sge_in[s].length;
			sge_at->lkey = sge_in[s].lkey;
		}
	}
	struct ibv_recv_wr *bad = NULL;
	int err = ibv_post_recv(GS_PTR(struct ibv_qp, qp), wrs, &bad);
	if (err != 0) {
		char what[96];
		snprintf(what, sizeof what, "ibv_post_recv (work request %ld of %d)",
			 bad != NULL ? (long) (bad - wrs) : -1L, nwr);
		gs_throw_io(env, what, err, NULL);
	}
out:
	if (wrs != stack_wr)
		free(wrs);
	if (sges != stack_sge)
		free(sges);
}

/* ---- completions ---- */

/*
 * Polls up to ne completions into DiSNI's record array at wc_list (which must hold ne records). Returns how many
 * were written, or -1 when ibv_poll_cq fails before any was.
 */
JNIEXPORT jint NATIVE(pollCQ)(JNIEnv *env, jobject self, jlong cq_handle, jint ne, jlong wc_list)
{
	GS_COUNT(pollCQ);
	(void) env;
	(void) self;
	if (ne < 0)
		return -1;
	struct ibv_cq *cq = GS_PTR(struct ibv_cq, cq_handle);
	struct gs_wc *out = GS_PTR(struct gs_wc, wc_list);
	struct ibv_wc batch[GS_POLL_BATCH];
	int total = 0;
	while (total < ne) {
		int want = ne - total < GS_POLL_BATCH ? ne - total : GS_POLL_BATCH;
		int got = ibv_poll_cq(cq, want, batch);
		if (got < 0)
			return total > 0 ? total : -1;
		for (int i = 0; i < got; i++) {
			struct gs_wc rec;
			memset(&rec, 0, sizeof rec);
			rec.wr_id = batch[i].wr_id;
			rec.status = (int32_t) batch[i].status;
			rec.opcode = (int32_t) batch[i].opcode;
			rec.vendor_err = batch[i].vendor_err;
			rec.byte_len = batch[i].byte_len;
			rec.imm_data = batch[i].imm_data;
			rec.qp_num = batch[i].qp_num;
			rec.src_qp = batch[i].src_qp;
			rec.wc_flags = (int32_t) batch[i].wc_flags;
			rec.pkey_index = batch[i].pkey_index;
			rec.slid = batch[i].slid;
			rec.sl = batch[i].sl;
			rec.dlid_path_bits = batch[i].dlid_path_bits;
			memcpy(&out[total + i], &rec, sizeof rec);
		}
		total += got;
		if (got < want)
			break;
	}
	return total;
}

JNIEXPORT jint NATIVE(reqNotifyCQ)(JNIEnv *env, jobject self, jlong cq, jint solicited_only)
{
	GS_COUNT(reqNotifyCQ);
	(void) env;
	(void) self;
	return ibv_req_notify_cq(GS_PTR(struct ibv_cq, cq), solicited_only != 0);
}

/*
 * Waits up to timeout ms (negative: no limit) for a completion event on the channel and takes it (0); -1 when
 * none came in time. The event is acknowledged by _ackCqEvent on the CQ, as DiSNI does after each event.
 */
JNIEXPORT jint NATIVE(getCqEvent)(JNIEnv *env, jobject self, jlong handle, jint timeout)
{
	GS_COUNT(getCqEvent);
	(void) self;
	struct ibv_comp_channel *channel = GS_PTR(struct ibv_comp_channel, handle);
	struct pollfd pfd = { .fd = channel->fd, .events = POLLIN };
	int ready = poll(&pfd, 1, timeout < 0 ? -1 : timeout);
	if (ready == 0 || (ready < 0 && errno == EINTR))
		return -1;
	if (ready < 0) {
		gs_throw_io(env, "poll(completion channel)", errno, NULL);
		return -1;
	}
	if ((pfd.revents & POLLIN) == 0) {
		gs_throw_io(env, "poll(completion channel)", EBADF, NULL);
		return -1;
	}
	struct ibv_cq *cq;
	void *cq_context;
	if (ibv_get_cq_event(channel, &cq, &cq_context) != 0) {
		gs_throw_io(env, "ibv_get_cq_event", errno != 0 ? errno : EIO, NULL);
		return -1;
	}
	return 0;
}

JNIEXPORT jint NATIVE(ackCqEvent)(JNIEnv *env, jobject self, jlong cq, jint nevents)
{
	GS_COUNT(ackCqEvent);
	(void) env;
	(void) self;
	if (nevents > 0)
		ibv_ack_cq_events(GS_PTR(struct ibv_cq, cq), (unsigned int) nevents);
	return 0;
}

/* ---- field look-ups ---- */

JNIEXPORT jint NATIVE(getQpNum)(JNIEnv *env, jobject self, jlong qp)
{
	GS_COUNT(getQpNum);
	(void) env;
	(void) self;
	return (jint) GS_PTR(struct ibv_qp, qp)->qp_num;
}

JNIEXPORT jint NATIVE(getContextFd)(JNIEnv *env, jobject self, jlong context)
{
	GS_COUNT(getContextFd);
	(void) env;
	(void) self;
	return GS_PTR(struct ibv_context, context)->cmd_fd;
}

JNIEXPORT jint NATIVE(getContextNumCompVectors)(JNIEnv *env, jobject self, jlong context)
{
	GS_COUNT(getContextNumCompVectors);
	(void) env;
	(void) self;
	return GS_PTR(struct ibv_context, context)->num_comp_vectors;
}

JNIEXPORT jint NATIVE(getPdHandle)(JNIEnv *env, jobject self, jlong pd)
{
	GS_COUNT(getPdHandle);
	(void) env;
	(void) self;
	return (jint) GS_PTR(struct ibv_pd, pd)->handle;
}

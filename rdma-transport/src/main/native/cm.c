/*
 * The RDMA connection manager half of DiSNI's NativeDispatcher: event channels, CM ids, addresses, connection
 * set-up and tear-down, and QPs created on CM ids.
 */
#include "gs_disni.h"
#include "jni/com_ibm_disni_verbs_impl_NativeDispatcher.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <string.h>
#include <sys/socket.h>

#define NATIVE(name) JNICALL Java_com_ibm_disni_verbs_impl_NativeDispatcher__1##name

/* Upper bounds we ask for where DiSNI's Java side gives no value. */
#define GS_QP_MAX_SGE 8		/* _createQP has no SGE count parameter: min(device max_sge, this) */
#define GS_RD_ATOMIC_MAX 16	/* outstanding RDMA READs per QP, each way: min(device limit, this) */

static const char NO_DEVICE_HINT[] =
	": no usable RDMA device (ibv_get_device_list finds none). Load the NIC's RDMA driver, or add a soft-RoCE "
	"device: rdma link add rxe0 type rxe netdev <interface>";

static const char BIND_HINT[] =
	": no RDMA device has this address; it must be assigned to the interface of one (see `rdma link`), or be a "
	"wildcard";

/*
 * A connect request's initiator depth and responder resources, kept on the new id (its context pointer, which
 * nothing else uses) until _accept: DiSNI acknowledges events in _getCmEvent, before accept, and its accept
 * passes neither value.
 */
#define GS_CTX_HAS_REQUEST ((uintptr_t) 1 << 16)

static inline uint8_t min_u8(int a, int b)
{
	int m = a < b ? a : b;
	return (uint8_t) (m < 0 ? 0 : (m > 255 ? 255 : m));
}

/* Copies a DiSNI socket address buffer (sockaddr_in, or sockaddr_in6, family first) into clean storage. */
static int read_sockaddr(jlong address, struct sockaddr_storage *out)
{
	const struct sockaddr *in = GS_PTR(const struct sockaddr, address);
	memset(out, 0, sizeof *out);
	if (in->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *) in;
		struct sockaddr_in *o = (struct sockaddr_in *) out;
		o->sin_family = AF_INET;
		o->sin_port = sin->sin_port;
		o->sin_addr = sin->sin_addr;
		return 0;
	}
	if (in->sa_family == AF_INET6) {
		memcpy(out, in, sizeof(struct sockaddr_in6));
		return 0;
	}
	return EAFNOSUPPORT;
}

/* Writes a CM id's address into a DiSNI socket address buffer (_getSockAddrInSize() bytes). */
static jint write_sockaddr(const struct sockaddr *addr, jlong address)
{
	if (addr == NULL)
		return -EINVAL;
	if (addr->sa_family == AF_INET) {
		memcpy(GS_PTR(void, address), addr, sizeof(struct sockaddr_in));
		return 0;
	}
	if (addr->sa_family == AF_INET6) {
		memcpy(GS_PTR(void, address), addr, sizeof(struct sockaddr_in6));
		return 0;
	}
	return -EAFNOSUPPORT;
}

JNIEXPORT jlong NATIVE(createEventChannel)(JNIEnv *env, jobject self)
{
	GS_COUNT(createEventChannel);
	(void) self;
	errno = 0;
	struct rdma_event_channel *channel = rdma_create_event_channel();
	if (channel == NULL) {
		int err = errno != 0 ? errno : ENODEV;
		gs_throw_io(env, "rdma_create_event_channel", err,
			    (err == ENODEV || err == ENOENT || err == ENOSYS) ? NO_DEVICE_HINT : NULL);
		return -1;
	}
	return GS_HANDLE(channel);
}

JNIEXPORT jint NATIVE(destroyEventChannel)(JNIEnv *env, jobject self, jlong channel)
{
	GS_COUNT(destroyEventChannel);
	(void) env;
	(void) self;
	rdma_destroy_event_channel(GS_PTR(struct rdma_event_channel, channel));
	return 0;
}

JNIEXPORT jlong NATIVE(createId)(JNIEnv *env, jobject self, jlong channel, jshort ps)
{
	GS_COUNT(createId);
	(void) self;
	struct rdma_cm_id *id = NULL;
	if (rdma_create_id(GS_PTR(struct rdma_event_channel, channel), &id, NULL,
			   (enum rdma_port_space) (uint16_t) ps) != 0) {
		int err = errno;
		gs_throw_io(env, "rdma_create_id", err, err == ENODEV ? NO_DEVICE_HINT : NULL);
		return -1;
	}
	return GS_HANDLE(id);
}

JNIEXPORT jint NATIVE(destroyCmId)(JNIEnv *env, jobject self, jlong handle)
{
	GS_COUNT(destroyCmId);
	(void) env;
	(void) self;
	struct rdma_cm_id *id = GS_PTR(struct rdma_cm_id, handle);
	/* A QP left on the id would keep its CQs and PD busy for the life of the process. */
	if (id->qp != NULL)
		rdma_destroy_qp(id);
	return rdma_destroy_id(id) == 0 ? 0 : -errno;
}

JNIEXPORT jint NATIVE(destroyEp)(JNIEnv *env, jobject self, jlong handle)
{
	GS_COUNT(destroyEp);
	(void) env;
	(void) self;
	/* The QP (and SRQ) if any, then the id. DiSNI does not mark its RdmaCmId closed after this. */
	rdma_destroy_ep(GS_PTR(struct rdma_cm_id, handle));
	return 0;
}

JNIEXPORT void NATIVE(bindAddr)(JNIEnv *env, jobject self, jlong id, jlong address)
{
	GS_COUNT(bindAddr);
	(void) self;
	struct sockaddr_storage addr;
	int err = read_sockaddr(address, &addr);
	if (err == 0 && rdma_bind_addr(GS_PTR(struct rdma_cm_id, id), (struct sockaddr *) &addr) != 0)
		err = errno;
	if (err != 0)
		/* ENODEV here: devices there may be, but none behind this address's interface */
		gs_throw_io(env, "rdma_bind_addr", err, err == EADDRNOTAVAIL || err == ENODEV ? BIND_HINT : NULL);
}

JNIEXPORT void NATIVE(listen)(JNIEnv *env, jobject self, jlong id, jint backlog)
{
	GS_COUNT(listen);
	(void) self;
	if (rdma_listen(GS_PTR(struct rdma_cm_id, id), backlog) != 0)
		gs_throw_io(env, "rdma_listen", errno, NULL);
}

JNIEXPORT void NATIVE(resolveAddr)(JNIEnv *env, jobject self, jlong id, jlong src, jlong dst, jint timeout)
{
	GS_COUNT(resolveAddr);
	(void) self;
	struct sockaddr_storage source, destination;
	int err = src != 0 ? read_sockaddr(src, &source) : 0;
	if (err == 0)
		err = read_sockaddr(dst, &destination);
	if (err == 0 && rdma_resolve_addr(GS_PTR(struct rdma_cm_id, id), src != 0 ? (struct sockaddr *) &source : NULL,
					  (struct sockaddr *) &destination, timeout) != 0)
		err = errno;
	if (err != 0)
		gs_throw_io(env, "rdma_resolve_addr", err, NULL);
}

JNIEXPORT void NATIVE(resolveRoute)(JNIEnv *env, jobject self, jlong id, jint timeout)
{
	GS_COUNT(resolveRoute);
	(void) self;
	if (rdma_resolve_route(GS_PTR(struct rdma_cm_id, id), timeout) != 0)
		gs_throw_io(env, "rdma_resolve_route", errno, NULL);
}

/*
 * Waits up to timeout ms (negative: no limit) for the next event, writes the listening id (0 unless a connect
 * request) and the event's id to the two addresses and returns the event type; -1 when none came in time.
 * The event is acknowledged here, once its fields are copied: DiSNI's _ackCmEvent passes only the event type,
 * which cannot name an event, and an unacknowledged event would make rdma_destroy_id wait forever.
 */
JNIEXPORT jint NATIVE(getCmEvent)(JNIEnv *env, jobject self, jlong handle, jlong listen_id_out, jlong id_out,
				  jint timeout)
{
	GS_COUNT(getCmEvent);
	(void) env;
	(void) self;
	struct rdma_event_channel *channel = GS_PTR(struct rdma_event_channel, handle);
	struct pollfd pfd = { .fd = channel->fd, .events = POLLIN };
	int ready = poll(&pfd, 1, timeout < 0 ? -1 : timeout);
	if (ready <= 0 || (pfd.revents & POLLIN) == 0)
		return -1;
	struct rdma_cm_event *event;
	if (rdma_get_cm_event(channel, &event) != 0)
		return -1;
	jint type = (jint) event->event;
	if (event->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		event->id->context = (void *) (GS_CTX_HAS_REQUEST |
					       ((uintptr_t) event->param.conn.initiator_depth << 8) |
					       (uintptr_t) event->param.conn.responder_resources);
	}
	*GS_PTR(uint64_t, listen_id_out) = (uint64_t) (uintptr_t) event->listen_id;
	*GS_PTR(uint64_t, id_out) = (uint64_t) (uintptr_t) event->id;
	rdma_ack_cm_event(event);
	return type;
}

/* Events are acknowledged by _getCmEvent (see there); nothing is left to do. */
JNIEXPORT jint NATIVE(ackCmEvent)(JNIEnv *env, jobject self, jint event_type)
{
	GS_COUNT(ackCmEvent);
	(void) env;
	(void) self;
	(void) event_type;
	return 0;
}

static int query_device(JNIEnv *env, struct ibv_context *context, struct ibv_device_attr *attr, const char *what)
{
	int err = context != NULL ? ibv_query_device(context, attr) : ENODEV;
	if (err != 0)
		gs_throw_io(env, what, err, NULL);
	return err;
}

JNIEXPORT void NATIVE(connect)(JNIEnv *env, jobject self, jlong handle, jint retry_count, jint rnr_retry_count,
			       jlong private_data, jbyte private_data_len)
{
	GS_COUNT(connect);
	(void) self;
	struct rdma_cm_id *id = GS_PTR(struct rdma_cm_id, handle);
	struct ibv_device_attr attr;
	if (query_device(env, id->verbs, &attr, "rdma_connect: ibv_query_device") != 0)
		return;
	struct rdma_conn_param param;
	memset(&param, 0, sizeof param);
	uint8_t length = (uint8_t) private_data_len;
	if (private_data != 0 && length > 0) {
		param.private_data = GS_PTR(const void, private_data);
		param.private_data_len = length;
	}
	param.responder_resources = min_u8(attr.max_qp_rd_atom, GS_RD_ATOMIC_MAX);
	param.initiator_depth = min_u8(attr.max_qp_init_rd_atom, GS_RD_ATOMIC_MAX);
	param.flow_control = 1;
	param.retry_count = min_u8(retry_count, 7);
	param.rnr_retry_count = min_u8(rnr_retry_count, 7);
	if (rdma_connect(id, &param) != 0)
		gs_throw_io(env, "rdma_connect", errno, NULL);
}

JNIEXPORT void NATIVE(accept)(JNIEnv *env, jobject self, jlong handle, jint retry_count, jint rnr_retry_count)
{
	GS_COUNT(accept);
	(void) self;
	struct rdma_cm_id *id = GS_PTR(struct rdma_cm_id, handle);
	struct ibv_device_attr attr;
	if (query_device(env, id->verbs, &attr, "rdma_accept: ibv_query_device") != 0)
		return;
	int remote_initiator_depth = GS_RD_ATOMIC_MAX, remote_responder_resources = GS_RD_ATOMIC_MAX;
	uintptr_t request = (uintptr_t) id->context;
	if (request & GS_CTX_HAS_REQUEST) {
		remote_initiator_depth = (int) ((request >> 8) & 0xff);
		remote_responder_resources = (int) (request & 0xff);
	}
	struct rdma_conn_param param;
	memset(&param, 0, sizeof param);
	/* Serve as many READs as the peer may issue, issue no more than the peer serves, both within our device. */
	param.responder_resources = min_u8(min_u8(attr.max_qp_rd_atom, GS_RD_ATOMIC_MAX), remote_initiator_depth);
	param.initiator_depth = min_u8(min_u8(attr.max_qp_init_rd_atom, GS_RD_ATOMIC_MAX), remote_responder_resources);
	param.flow_control = 1;
	param.retry_count = min_u8(retry_count, 7);
	param.rnr_retry_count = min_u8(rnr_retry_count, 7);
	if (rdma_accept(id, &param) != 0)
		gs_throw_io(env, "rdma_accept", errno, NULL);
}

JNIEXPORT jint NATIVE(disconnect)(JNIEnv *env, jobject self, jlong id)
{
	GS_COUNT(disconnect);
	(void) env;
	(void) self;
	return rdma_disconnect(GS_PTR(struct rdma_cm_id, id)) == 0 ? 0 : -errno;
}

JNIEXPORT jint NATIVE(getSrcAddr)(JNIEnv *env, jobject self, jlong id, jlong address)
{
	GS_COUNT(getSrcAddr);
	(void) env;
	(void) self;
	return write_sockaddr(rdma_get_local_addr(GS_PTR(struct rdma_cm_id, id)), address);
}

JNIEXPORT jint NATIVE(getDstAddr)(JNIEnv *env, jobject self, jlong id, jlong address)
{
	GS_COUNT(getDstAddr);
	(void) env;
	(void) self;
	return write_sockaddr(rdma_get_peer_addr(GS_PTR(struct rdma_cm_id, id)), address);
}

JNIEXPORT jlong NATIVE(createQP)(JNIEnv *env, jobject self, jlong handle, jlong pd_handle, jlong send_cq,
				 jlong recv_cq, jint qp_type, jint max_send_wr, jint max_recv_wr, jint max_inline)
{
	GS_COUNT(createQP);
	(void) self;
	struct rdma_cm_id *id = GS_PTR(struct rdma_cm_id, handle);
	struct ibv_pd *pd = GS_PTR(struct ibv_pd, pd_handle);
	struct ibv_device_attr attr;
	if (query_device(env, pd->context, &attr, "rdma_create_qp: ibv_query_device") != 0)
		return -1;
	if (max_send_wr < 0 || max_recv_wr < 0 || max_inline < 0) {
		gs_throw_io(env, "rdma_create_qp: negative capacity", EINVAL, NULL);
		return -1;
	}
	int sge = attr.max_sge < GS_QP_MAX_SGE ? attr.max_sge : GS_QP_MAX_SGE;
	struct ibv_qp_init_attr init;
	memset(&init, 0, sizeof init);
	init.send_cq = GS_PTR(struct ibv_cq, send_cq);
	init.recv_cq = GS_PTR(struct ibv_cq, recv_cq);
	init.qp_type = (enum ibv_qp_type) qp_type;
	init.cap.max_send_wr = (uint32_t) max_send_wr;
	init.cap.max_recv_wr = (uint32_t) max_recv_wr;
	init.cap.max_send_sge = (uint32_t) sge;
	init.cap.max_recv_sge = (uint32_t) sge;
	init.cap.max_inline_data = (uint32_t) max_inline;
	init.sq_sig_all = 0;
	if (rdma_create_qp(id, pd, &init) != 0) {
		gs_throw_io(env, "rdma_create_qp", errno, NULL);
		return -1;
	}
	return GS_HANDLE(id->qp);
}

JNIEXPORT jint NATIVE(destroyQP)(JNIEnv *env, jobject self, jlong id)
{
	GS_COUNT(destroyQP);
	(void) env;
	(void) self;
	rdma_destroy_qp(GS_PTR(struct rdma_cm_id, id));
	return 0;
}

/* ---- field look-ups ---- */

JNIEXPORT jlong NATIVE(getContext)(JNIEnv *env, jobject self, jlong handle)
{
	GS_COUNT(getContext);
	(void) self;
	struct rdma_cm_id *id = GS_PTR(struct rdma_cm_id, handle);
	if (id->verbs == NULL) {
		/* An id bound to a wildcard address, or not bound or resolved yet, has no device. */
		gs_throw(env, "java/io/IOException",
			 "RDMA CM id has no device yet: bind it to a local RDMA address or resolve a destination first");
		return -1;
	}
	return GS_HANDLE(id->verbs);
}

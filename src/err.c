#include "kreflect.h"

#ifndef KR_TARGET
#define KR_TARGET "unknown"
#endif

const char *kr_strerror(int err)
{
	switch (err) {
	case KR_OK: return "success";
	case KR_EINVAL: return "invalid argument or input";
	case KR_ENOSPC: return "capacity exhausted";
	case KR_EIO: return "input/output error";
	case KR_ETLS: return "TLS error";
	case KR_EPROTO: return "protocol error";
	case KR_ETIMEDOUT: return "timed out";
	case KR_ECLOSED: return "connection closed by peer";
	case KR_ETOOBIG: return "too large";
	case KR_ENOENT: return "not found";
	case KR_EAUTH: return "authentication failed";
	case KR_ESTATE: return "invalid state";
	case KR_ECANCELED: return "cancelled";
	case KR_ENOTSUP: return "not built in";
	}
	return "unknown error";
}

const char *kr_target(void)
{
	return KR_TARGET;
}

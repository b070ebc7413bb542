/*
 * Fuzzes the watch path end to end, from raw socket bytes to the store: the
 * unmodified loop, connection, HTTP head parser, chunked decoder, object and
 * items framers, watch event decoder, reflector state machine (watch-list,
 * LIST pages, watch, relist, backoff, Retry-After, deadlines) and store, on
 * the scripted network of netsim.h (linked with NETSIM_WRAP).
 *
 * Input: byte 0 chooses the setup (bits 0-1 watch-list auto/on/off/auto, bit
 * 2 keep managedFields, bit 3 a second resource (deployments.apps), bit 4
 * pages of 2, bits 5-6 arena 1 MiB/64 KiB/8 KiB/3 KiB, bit 7 configmaps get
 * half the arena), byte 1 seeds the reflector's randomness; then the server's
 * responses, one per request in order, separated by NS_SEPARATOR, each with
 * the two header bytes that netsim.h describes (how it ends, read sizes).
 */
#include "netsim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NS_SEPARATOR "\n@@\n"

/* The setup from bytes 0 and 1. */
static void ns_config_from(uint8_t c0, uint8_t c1, struct ns_config *c)
{
	static const size_t arenas[4] = { NS_ARENA_MAX, 64u << 10, 8u << 10, 3u << 10 };
	static const int wl[4] = { KR_WL_AUTO, KR_WL_ON, KR_WL_OFF, KR_WL_AUTO };

	c->watch_list = wl[c0 & 3];
	c->keep_managed_fields = (c0 >> 2) & 1;
	c->two_resources = (c0 >> 3) & 1;
	c->page_size = (c0 >> 4) & 1 ? 2 : 0;
	c->arena = arenas[(c0 >> 5) & 3];
	c->quota = (c0 >> 7) & 1;
	c->seed = c1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ns_config c;
	const size_t seplen = sizeof(NS_SEPARATOR) - 1;
	size_t at, start;

	if (size < 2)
		return 0;
	ns_reset();
	ns_config_from(data[0], data[1], &c);
	for (at = start = 2; at + seplen <= size; at++) {
		if (memcmp(data + at, NS_SEPARATOR, seplen) != 0)
			continue;
		ns_add_response(data + start, at - start);
		start = at + seplen;
		at = start - 1;
	}
	if (start < size)
		ns_add_response(data + start, size - start);
	ns_run(&c);
	return 0;
}

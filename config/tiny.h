/*
 * Capacities of `make PROFILE=tiny` (read first through KR_USER_CONFIG): the
 * compile-time resource table's one resource and about 100 small objects, for
 * gateways with a few MB of flash and RAM. Each may still be set with -D.
 * tests/build/README.md "Sizes" has the measured peak RSS.
 */
#ifndef KR_TINY_H
#define KR_TINY_H

#ifndef KR_MAX_RESOURCES
#define KR_MAX_RESOURCES 1
#endif
#ifndef KR_WITH_WAKEUP
#define KR_WITH_WAKEUP 0                  /* the CLI has no host thread to wake it */
#endif
#ifndef KR_MAX_OBJECTS
#define KR_MAX_OBJECTS 128
#endif
#ifndef KR_ARENA_BYTES
#define KR_ARENA_BYTES (96u * 1024u)      /* 100 ConfigMaps of ~400 bytes, with room */
#endif
#ifndef KR_ARENA_MIN
#define KR_ARENA_MIN (32u * 1024u)
#endif
#ifndef KR_STORE_RESERVE
#define KR_STORE_RESERVE (16u * 1024u)
#endif
#ifndef KR_MAX_OBJECT_BYTES
#define KR_MAX_OBJECT_BYTES (32u * 1024u)
#endif
#ifndef KR_JSON_TOKENS
#define KR_JSON_TOKENS 512
#endif
#ifndef KR_JSONL_BUFFER_BYTES
#define KR_JSONL_BUFFER_BYTES 4096
#endif
#ifndef KR_HTTP_LINE_MAX
#define KR_HTTP_LINE_MAX 2048
#endif
#ifndef KR_HTTP_MAX_HEADERS
#define KR_HTTP_MAX_HEADERS 32
#endif
#ifndef KR_HTTP_REQUEST_MAX
#define KR_HTTP_REQUEST_MAX 4096
#endif
/* TLS hands over decrypted bytes in pieces: a smaller read costs calls, not records. */
#ifndef KR_IO_CHUNK
#define KR_IO_CHUNK 4096
#endif
/* A server's TLS alert by its number, the rarer mbedTLS codes as hex: 2 KB less. */
#ifndef KR_TLS_ERROR_TEXTS_FULL
#define KR_TLS_ERROR_TEXTS_FULL 0
#endif
/* A changed object held in its old version's place: the code would cost the file a 4 KiB step. */
#ifndef KR_HOLD_IN_PLACE
#define KR_HOLD_IN_PLACE 0
#endif
#ifndef KR_PEM_MAX
#define KR_PEM_MAX (16u * 1024u)
#endif
#ifndef KR_TOKEN_MAX
#define KR_TOKEN_MAX 4096
#endif
/* The state directory is not built in: its buffers (part of the client) are minimal. */
#ifndef KR_STATE_BUFFER_BYTES
#define KR_STATE_BUFFER_BYTES 1024u
#endif
#ifndef KR_STATE_JOURNAL_KEY_BYTES
#define KR_STATE_JOURNAL_KEY_BYTES 1024u
#endif
/* A P-256 handshake needs far less than an RSA-4096 one: a 16 KiB input record,
 * a 4 KiB output one and the certificates and keys of the handshake. */
#ifndef KR_TLS_HEAP_PER_CONN
#define KR_TLS_HEAP_PER_CONN (32u * 1024u)
#endif
#ifndef KR_TLS_HEAP_SIZE
#define KR_TLS_HEAP_SIZE (KR_TLS_HEAP_PER_CONN * (KR_MAX_RESOURCES + 1) + 8u * 1024u)
#endif

#endif /* KR_TINY_H */

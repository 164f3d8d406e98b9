/* Big-endian loads and stores for the compiled record core: Kafka's fixed-width fields are
 * big-endian (docs/formats.md §0.1). memcpy + byte swap compiles to one load and one bswap. */
#ifndef KMIGRATE_KBYTES_H
#define KMIGRATE_KBYTES_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define KB_BE16(x) (x)
#define KB_BE32(x) (x)
#define KB_BE64(x) (x)
#else
#define KB_BE16(x) __builtin_bswap16(x)
#define KB_BE32(x) __builtin_bswap32(x)
#define KB_BE64(x) __builtin_bswap64(x)
#endif

static inline int16_t kb_i16(const unsigned char *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return (int16_t)KB_BE16(v);
}
static inline int32_t kb_i32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return (int32_t)KB_BE32(v);
}
static inline uint32_t kb_u32(const unsigned char *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return KB_BE32(v);
}
static inline int64_t kb_i64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return (int64_t)KB_BE64(v);
}
static inline void kb_put_i16(unsigned char *p, int16_t x) {
    uint16_t v = KB_BE16((uint16_t)x);
    memcpy(p, &v, 2);
}
static inline void kb_put_u32(unsigned char *p, uint32_t x) {
    uint32_t v = KB_BE32(x);
    memcpy(p, &v, 4);
}
static inline void kb_put_i32(unsigned char *p, int32_t x) { kb_put_u32(p, (uint32_t)x); }
static inline void kb_put_i64(unsigned char *p, int64_t x) {
    uint64_t v = KB_BE64((uint64_t)x);
    memcpy(p, &v, 8);
}
/* Overflow-checked int64 arithmetic: 1 when the result does not fit (Python ints never
 * overflow, so such a value is irregular and goes to the Python parser). */
static inline int kb_add_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
static inline int kb_sub_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_sub_overflow(a, b, r); }

#endif

/* CRC-32 (IEEE, zlib's) and CRC-32C (Castagnoli) for the compiled record core.
 *
 * Parameters (docs/formats.md, "Checksums"): both reflected, init and final xor 0xFFFFFFFF;
 * CRC-32 poly 0xEDB88320 (v0/v1 messages), CRC-32C poly 0x82F63B78 (v2 batches).
 * The value passed in and returned is the finished CRC, as zlib.crc32(data, value) and
 * crc32c.crc32c(data, value) take and give it, so calls chain over split buffers.
 *
 * x86-64: CRC-32C with the SSE4.2 crc32 instruction (three interleaved lanes joined by shift
 * tables, so the instruction's latency does not bound it), CRC-32 by carry-less multiplication
 * (PCLMULQDQ folding, Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ",
 * from 16 bytes up, the last partial block folded with byte shuffles instead of the tables);
 * both chosen at run time from CPUID, so the module runs on any x86-64. Elsewhere, or on CPUs
 * without them, slicing-by-8 tables. Only a C compiler is needed: no zlib headers.
 */
#ifndef KMIGRATE_KCRC_H
#define KMIGRATE_KCRC_H

#include <stddef.h>
#include <stdint.h>

#define KCRC_HW_CRC32C 1 /* CRC-32C by the SSE4.2 instruction */
#define KCRC_HW_CRC32 2  /* CRC-32 by PCLMULQDQ folding */

/* Build the tables and probe the CPU; call once before the others. use_hw = 0 forces the
 * table paths (tests compare them with the hardware ones). Returns the KCRC_HW_* flags in use. */
int kcrc_init(int use_hw);
uint32_t kcrc32(uint32_t crc, const unsigned char *p, size_t n);
uint32_t kcrc32c(uint32_t crc, const unsigned char *p, size_t n);

/* The bytes and calls each function has checksummed in this process since the last
 * kcrc_take_counts (which starts them again from zero): how much CRC work a job did, for the
 * benchmarks' ceilings (docs/benchmarks.md). Plain counters, one add per call: threads
 * checksumming at once may lose a few counts (a statistic, not a result). */
typedef struct {
    uint64_t crc32_bytes, crc32_calls, crc32c_bytes, crc32c_calls;
} kcrc_counts;
kcrc_counts kcrc_take_counts(void);

#endif

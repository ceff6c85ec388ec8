/*
 * fuzz.h - what every harness shares: a property check that aborts (so
 * libFuzzer saves the input), and the HMAC keys of the sequencer harness
 * and its corpus.
 */
#ifndef FENCEGATE_FUZZ_H
#define FENCEGATE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A property that must hold for every input; abort() on violation. */
#define PROPERTY(cond)                                                     \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: property violated: %s\n",  \
				__FILE__, __LINE__, #cond);                \
			abort();                                           \
		}                                                          \
	} while (0)

/* The key the corpus' sequencers were signed with (32 bytes), and another
 * one no sequencer was signed with. */
#define FUZZ_KEY "fencegate-fuzz-key-0123456789abc"
#define FUZZ_KEY_LEN (sizeof(FUZZ_KEY) - 1)
#define FUZZ_OTHER_KEY "fencegate-other-key-0123456789ab"
#define FUZZ_OTHER_KEY_LEN (sizeof(FUZZ_OTHER_KEY) - 1)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif

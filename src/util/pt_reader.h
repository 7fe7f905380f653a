/* pt_reader — read one integer vector out of a torch.save file, without
 * Python and without executing anything.
 *
 * DESIGN
 * torch.save (PyTorch >= 1.6) writes a zip archive of stored (not
 * compressed) entries under one folder PREFIX/:
 *
 *   PREFIX/data.pkl     a pickle (protocol 2) of the saved object
 *   PREFIX/data/KEY     the raw bytes of each storage the pickle names
 *   PREFIX/byteorder    "little" (PyTorch >= 2.1; absent = little)
 *   PREFIX/version, PREFIX/.data/...   ignored
 *
 * A saved 1-D tensor pickles as
 *   torch._utils._rebuild_tensor_v2(
 *       persistent_id(('storage', torch.LongStorage, KEY, 'cpu', NUMEL)),
 *       OFFSET, (SIZE,), (STRIDE,), requires_grad, OrderedDict()[, metadata])
 * and a list of ints as EMPTY_LIST, MARK, ints..., APPENDS.
 *
 * The zip layer is read by hand (end-of-central-directory record, central
 * directory, local headers, CRC-32): torch only ever writes stored entries,
 * so a zip library would bring a decompressor we would refuse anyway.
 * The pickle layer is a restricted stack machine over typed values: the
 * only callables it knows are the three above (matched by name, never
 * imported or run), the only persistent ids are storages, and the result
 * must be one tensor (int64 or int32 storage, 1-D, stride 1, inside its
 * storage) or one list of ints.  Everything else — another global, opcode,
 * dtype, shape, a tensor inside a list, a compressed or zip64 entry, a
 * big-endian file — is refused with a message saying what was found.
 * Bounds: file 64 MiB, stack / memo / values 65,536, tuples of 8 items,
 * vectors of 2^24 entries.
 *
 * Ownership: the caller owns the buffer it passes and frees *out. */
#ifndef SGLC_UTIL_PT_READER_H
#define SGLC_UTIL_PT_READER_H

#include <stddef.h>
#include <stdint.h>

#define PT_MAX_FILE_BYTES ((size_t)64 << 20)
#define PT_MAX_VECTOR ((int64_t)1 << 24)

/* Parse the torch.save image buf (len bytes) whose object is one integer
 * vector.  0 with *out (malloc'd, *n >= 0 entries), or -1 with the reason
 * in err (nothing allocated). */
int pt_read_int_vector(const uint8_t *buf, size_t len, int64_t **out, int64_t *n, char *err, size_t errlen);

/* pt_read_int_vector over the file at path (read whole; refused above
 * PT_MAX_FILE_BYTES).  0, or -1 with the reason in err. */
int pt_read_int_vector_file(const char *path, int64_t **out, int64_t *n, char *err, size_t errlen);

#endif

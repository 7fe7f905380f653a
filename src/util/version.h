/* version — the sglc version string, shown by `sglc version` and
 * /get_server_info (one definition for cli/ and api/). */
#ifndef SGLC_UTIL_VERSION_H
#define SGLC_UTIL_VERSION_H

#define SGLC_VERSION "0.1.0"

#endif

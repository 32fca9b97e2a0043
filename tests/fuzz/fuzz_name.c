/*
 * fuzz_name: the name a front end passes to zvol_open, an NBD export
 * name a client chose (up to 4 KiB of anything): hostile input.
 *
 * One pool ('zvol', on a memory device) stays open; each input is a name
 * (up to its first NUL).  Checked: only the pool's volume name (or none)
 * opens it, anything else is -ENOENT, and no message the engine logs on
 * the way carries a control character: a name must not write lines of
 * its own into the server's log.
 */
#include <config.h>

#include "fuzz.h"

#define NAME_MAX_LEN 4096u           /* NBD's limit on export names */
#define NAME_DEVSIZE (20ull << 20)

static fz_memdev_t fz_md;
static zvol_pool_t *fz_pool;

/* Every message is one line of text. */
static void
name_log_check (enum zv_log_level level, const char *msg)
{
  for (const unsigned char *p = (const unsigned char *) msg; *p; p++)
    FZ_CHECK (*p >= 0x20 && *p != 0x7f);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  zvol_pool_config_t pc;

  fz_setup ();
  fz_memdev_create (&fz_md, "name", NAME_DEVSIZE);
  zvol_pool_config_init (&pc);
  pc.pc_devices[0] = fz_md.md_path;
  pc.pc_ndevices = 1;
  pc.pc_create = true;
  pc.pc_volsize = 1u << 20;
  pc.pc_sparse = true;
  pc.pc_zil_size = 512u << 10;
  pc.pc_cache_size = 1u << 20;
  pc.pc_txg.tt_timeout_ms = 3600 * 1000;
  if (zvol_pool_open (&pc, &fz_pool) < 0)
    abort ();
  fz_log_check = name_log_check;
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static char name[NAME_MAX_LEN + 1];
  size_t n = ZV_MIN (size, (size_t) NAME_MAX_LEN);
  zvol_t *zv = NULL;
  int r;

  memcpy (name, data, n);
  name[n] = '\0';
  r = zvol_open (fz_pool, name, NULL, &zv);
  if (strcmp (name, zvol_pool_name (fz_pool)) == 0) {
    FZ_CHECK (r == 0 && zv != NULL);
    FZ_CHECK (strcmp (zvol_name (zv), name) == 0);
    FZ_CHECK (zvol_close (zv) == 0);
  }
  else
    FZ_CHECK (r == -ENOENT && zv == NULL);
  return 0;
}

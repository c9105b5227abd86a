/* tlsreal.c — the TLS library functions, found once (see tlsreal.h). */
#include "shim/tlsreal.h"
#include "shim/real.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static const struct {
    const char *name;
    const char *lib; /* a loaded object whose path holds this has it */
} rows[RL_TLS_NFN] = {
    [RL_TLS_SSL_WRITE] = {"SSL_write", "/libssl.so"},
    [RL_TLS_SSL_WRITE_EX] = {"SSL_write_ex", "/libssl.so"},
    [RL_TLS_SSL_GET_ERROR] = {"SSL_get_error", "/libssl.so"},
    [RL_TLS_SSL_FREE] = {"SSL_free", "/libssl.so"},
    [RL_TLS_SSL_GET_FD] = {"SSL_get_fd", "/libssl.so"},
    [RL_TLS_SSL_GET_SERVERNAME] = {"SSL_get_servername", "/libssl.so"},
    [RL_TLS_SSL_CONNECT] = {"SSL_connect", "/libssl.so"},
    [RL_TLS_SSL_SENDFILE] = {"SSL_sendfile", "/libssl.so"},
    [RL_TLS_GNUTLS_RECORD_SEND] = {"gnutls_record_send", "/libgnutls.so"},
    [RL_TLS_GNUTLS_DEINIT] = {"gnutls_deinit", "/libgnutls.so"},
    [RL_TLS_GNUTLS_SERVER_NAME_SET] = {"gnutls_server_name_set",
                                       "/libgnutls.so"},
    [RL_TLS_GNUTLS_TRANSPORT_GET_INT] = {"gnutls_transport_get_int",
                                         "/libgnutls.so"},
    [RL_TLS_SSL_READ] = {"SSL_read", "/libssl.so"},
    [RL_TLS_SSL_READ_EX] = {"SSL_read_ex", "/libssl.so"},
    [RL_TLS_GNUTLS_RECORD_RECV] = {"gnutls_record_recv", "/libgnutls.so"},
    [RL_TLS_SSL_GET_WBIO] = {"SSL_get_wbio", "/libssl.so"},
    [RL_TLS_SSL_GET_CLIENT_RANDOM] = {"SSL_get_client_random", "/libssl.so"},
    [RL_TLS_BIO_METHOD_TYPE] = {"BIO_method_type", "/libcrypto.so"},
    [RL_TLS_SSL_PEEK] = {"SSL_peek", "/libssl.so"},
    [RL_TLS_SSL_PENDING] = {"SSL_pending", "/libssl.so"},
    [RL_TLS_GNUTLS_RECORD_CHECK_PENDING] = {"gnutls_record_check_pending",
                                            "/libgnutls.so"},
    [RL_TLS_ERR_SET_MARK] = {"ERR_set_mark", "/libcrypto.so"},
    [RL_TLS_ERR_POP_TO_MARK] = {"ERR_pop_to_mark", "/libcrypto.so"},
};

static _Atomic(void *) slots[RL_TLS_NFN];

/* The base of the object that holds this very function: a look-up that
 * lands in it found the hook, not the library. */
static void *own_base(void)
{
    static _Atomic(void *) base;
    void *b = atomic_load_explicit(&base, memory_order_relaxed);
    if (b == NULL) {
        Dl_info info;
        if (dladdr((void *)own_base, &info) != 0)
            b = info.dli_fbase;
        atomic_store_explicit(&base, b, memory_order_relaxed);
    }
    return b;
}

static bool ours(void *p)
{
    Dl_info info;
    return dladdr(p, &info) != 0 && info.dli_fbase == own_base();
}

struct find {
    const char *lib;
    char path[4096];
};

static int find_lib(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct find *f = data;
    const char *n = info->dlpi_name;
    if (n == NULL || strstr(n, f->lib) == NULL)
        return 0;
    size_t l = strlen(n);
    if (l >= sizeof f->path)
        return 0;
    memcpy(f->path, n, l + 1);
    return 1;
}

/* The library as the program loaded it: RTLD_NOLOAD never loads one, and
 * the handle is kept (the library stays for as long as the process, as
 * python's `_ssl` keeps it anyway), so a pointer found stays valid. */
static void *from_loaded(const char *lib, const char *name)
{
    struct find f = {.lib = lib};
    if (dl_iterate_phdr(find_lib, &f) == 0)
        return NULL;
    void *h = dlopen(f.path, RTLD_NOLOAD | RTLD_LAZY);
    if (h == NULL)
        return NULL;
    void *p = dlsym(h, name);
    return p != NULL && !ours(p) ? p : NULL;
}

void *rl_tls_real(enum rl_tls_fn fn)
{
    void *p = atomic_load_explicit(&slots[fn], memory_order_acquire);
    if (__builtin_expect(p != NULL, 1))
        return p;
    p = rl_real_next(rows[fn].name, NULL, NULL);
    if (p != NULL && ours(p))
        p = NULL;
    if (p == NULL) {
        p = dlsym(RTLD_DEFAULT, rows[fn].name);
        if (p != NULL && ours(p))
            p = NULL;
    }
    if (p == NULL)
        p = from_loaded(rows[fn].lib, rows[fn].name);
    if (p != NULL)
        atomic_store_explicit(&slots[fn], p, memory_order_release);
    return p;
}

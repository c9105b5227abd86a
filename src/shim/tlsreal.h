/* tlsreal.h — the TLS library functions behind the TLS hooks (SPEC §11).
 *
 * Found once per name, in order: dlsym(RTLD_NEXT) (a program that links
 * the library), dlsym(RTLD_DEFAULT) when that is not our own definition
 * (a program that carries the library in itself and exports it), and the
 * already-loaded library itself, found with dl_iterate_phdr and reopened
 * with RTLD_NOLOAD (python's `_ssl` dlopens libssl RTLD_LOCAL, out of
 * RTLD_NEXT's reach: measured). The shim never loads a library the
 * program did not load: a name found nowhere is NULL, and the hook fails
 * the call the way the library fails it. */
#ifndef RL_SHIM_TLSREAL_H
#define RL_SHIM_TLSREAL_H

enum rl_tls_fn {
    RL_TLS_SSL_WRITE = 0,
    RL_TLS_SSL_WRITE_EX,
    RL_TLS_SSL_GET_ERROR,
    RL_TLS_SSL_FREE,
    RL_TLS_SSL_GET_FD,
    RL_TLS_SSL_GET_SERVERNAME,
    RL_TLS_SSL_CONNECT,
    RL_TLS_SSL_SENDFILE,
    RL_TLS_GNUTLS_RECORD_SEND,
    RL_TLS_GNUTLS_DEINIT,
    RL_TLS_GNUTLS_SERVER_NAME_SET,
    RL_TLS_GNUTLS_TRANSPORT_GET_INT,
    RL_TLS_SSL_READ,
    RL_TLS_SSL_READ_EX,
    RL_TLS_GNUTLS_RECORD_RECV,
    RL_TLS_SSL_GET_WBIO,
    RL_TLS_SSL_GET_CLIENT_RANDOM,
    RL_TLS_BIO_METHOD_TYPE,
    RL_TLS_SSL_PEEK,
    RL_TLS_SSL_PENDING,
    RL_TLS_GNUTLS_RECORD_CHECK_PENDING,
    RL_TLS_ERR_SET_MARK,
    RL_TLS_ERR_POP_TO_MARK,
    RL_TLS_NFN
};

/* The real function `fn` (NULL: the program has no such library loaded).
 * One atomic load once found; a miss is looked for again next time. */
void *rl_tls_real(enum rl_tls_fn fn);

#endif

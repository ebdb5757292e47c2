#include <stdio.h>
#include <string.h>

#include "runtime.h"

static _Thread_local char noctx_error[1024];
static _Thread_local dc_status noctx_status;

static const char *const status_names[] = {
    [DC_OK] = "DC_OK",
    [DC_ERR_ARG] = "DC_ERR_ARG",
    [DC_ERR_SHAPE] = "DC_ERR_SHAPE",
    [DC_ERR_DTYPE] = "DC_ERR_DTYPE",
    [DC_ERR_STATE] = "DC_ERR_STATE",
    [DC_ERR_MEMORY] = "DC_ERR_MEMORY",
    [DC_ERR_DEVICE] = "DC_ERR_DEVICE",
    [DC_ERR_IO] = "DC_ERR_IO",
    [DC_ERR_FORMAT] = "DC_ERR_FORMAT",
    [DC_ERR_UNSUPPORTED] = "DC_ERR_UNSUPPORTED",
    [DC_ERR_MISMATCH] = "DC_ERR_MISMATCH",
};
_Static_assert(sizeof status_names / sizeof status_names[0] == DC_STATUS_COUNT,
               "every dc_status needs a name");

const char *dc_status_name(dc_status status)
{
    if ((int)status < 0 || status >= DC_STATUS_COUNT)
        return "DC_STATUS_UNKNOWN";
    return status_names[status];
}

dc_status dc_verror(dc_ctx *ctx, dc_status status, const char *fmt, va_list ap)
{
    /* Format into a temporary first: a message may quote the previous one. */
    char tmp[sizeof noctx_error];
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    char *buf = ctx ? ctx->error : noctx_error;
    size_t size = ctx ? sizeof ctx->error : sizeof noctx_error;
    snprintf(buf, size, "%s", tmp);
    if (ctx)
        ctx->status = status;
    else
        noctx_status = status;
    return status;
}

dc_status dc_error(dc_ctx *ctx, dc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dc_verror(ctx, status, fmt, ap);
    va_end(ap);
    return status;
}

dc_status dc_error_noctx(dc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dc_verror(NULL, status, fmt, ap);
    va_end(ap);
    return status;
}

const char *dc_last_error(const dc_ctx *ctx) { return ctx ? ctx->error : noctx_error; }

dc_status dc_last_status(const dc_ctx *ctx) { return ctx ? ctx->status : noctx_status; }

void dc_clear_error(dc_ctx *ctx)
{
    if (ctx) {
        ctx->error[0] = '\0';
        ctx->status = DC_OK;
    } else {
        noctx_error[0] = '\0';
        noctx_status = DC_OK;
    }
}

char *dc_shape_format(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t at = 0;
    at += (size_t)snprintf(buf + at, size - at, "[");
    for (int d = 0; d < ndim && at < size; ++d)
        at += (size_t)snprintf(buf + at, size - at, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

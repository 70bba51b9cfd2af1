"""``run``: a coroutine run to completion from synchronous code, in a script or a notebook alike.

Exported as ``ldp.run``. Lives in the local layer (asyncio at the edge of the users' side), so the
library's own modules (``ldp.experiment.estimate``) use it without importing the ``ldp`` package.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run"]

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine (a ``Session.round``, a learner) to completion; its result or its exception.

    What a script would do with ``asyncio.run``, and the same call works in a notebook. In a
    script no event loop runs and ``asyncio.run`` is right. In a notebook the kernel already runs
    a loop in the main thread, where ``asyncio.run`` raises "cannot be called from a running
    event loop"; top-level ``await`` would be a syntax error in the script form, and
    ``nest_asyncio`` would patch asyncio for the whole process. So when a loop is running in this
    thread, the coroutine runs on a fresh event loop in a worker thread and this call blocks until
    it is done. Interrupting while it waits cancels the coroutine (its ``async with`` blocks
    close, e.g. client processes stop) before re-raising.

    Parameters
    ----------
    coroutine : Coroutine
        The coroutine to run, e.g. ``session.round([...])``.

    Returns
    -------
    T
        What the coroutine returns.

    Raises
    ------
    ParameterError
        ``coroutine`` is not a coroutine (e.g. the function itself, not called).

    Examples
    --------
    >>> import asyncio
    >>> async def answer() -> int:
    ...     await asyncio.sleep(0)
    ...     return 42
    >>> run(answer())
    42
    >>> run(answer)  # the function, not a coroutine: one clear error
    Traceback (most recent call last):
    ...
    ldp.core.errors.ParameterError: ldp.run takes a coroutine, e.g. ldp.run(session.round([...])), got <function answer at ...>
    """
    if not asyncio.iscoroutine(coroutine):  # e.g. ldp.run(session.round) without its arguments
        from ldp.core.errors import ParameterError

        raise ParameterError(f"ldp.run takes a coroutine, e.g. ldp.run(session.round([...])), got {coroutine!r}")
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop in this thread: a script, or a plain Python console
        return asyncio.run(coroutine)
    import concurrent.futures
    import contextlib

    started: concurrent.futures.Future[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = concurrent.futures.Future()

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        started.set_result((asyncio.get_running_loop(), task))
        return await coroutine

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ldp-run")
    done: concurrent.futures.Future[T] | None = None
    try:
        done = pool.submit(asyncio.run, main())
        return done.result()
    except BaseException:  # KeyboardInterrupt (a kernel interrupt) while waiting
        if done is not None and not done.done():
            loop, task = started.result()
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing to cancel
                loop.call_soon_threadsafe(task.cancel)
        raise
    finally:
        pool.shutdown(wait=True)  # the cancelled coroutine's cleanup has run when this returns

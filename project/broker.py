"""The Redis broker transport, with one fix: a worker that loses Redis reconnects in place.

Celery 5.7 collects a broken connection (which clears its transport's client) and then closes
it, and kombu's Redis channel builds a connection from that cleared client whenever it next
needs one: to restore its unacknowledged messages as it closes, or to acknowledge a task that
ends after the reconnect. Either stopped the worker with "Unrecoverable error" (`'NoneType'
object has no attribute 'hostname'`) on Redis restarts; the supervisor's restart took 2 s on a
quiet machine and 20 s on a busy one. Here the old channel says its connection is gone, an
error kombu and Celery expect there (the close ignores it, the late ack is logged): those
messages stay in Redis's unacked set and come back after the visibility timeout, as a killed
worker's do (every task is safe to run twice).
"""

from kombu.transport import redis
from redis.exceptions import ConnectionError as RedisConnectionError


class Channel(redis.Channel):
    def _connparams(self, asynchronous=False):
        if self.connection.client is None:  # the connection was collected after it broke
            raise RedisConnectionError("the broker connection this channel used is gone")
        return super()._connparams(asynchronous)


class Transport(redis.Transport):
    Channel = Channel

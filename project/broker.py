"""The Redis broker transport, with one fix: a worker that loses Redis reconnects in place.

Celery 5.7 closes the broken connection after collecting it, and closing the channel restores
its unacknowledged messages through the connection the collect had just cleared: the worker
stopped with "Unrecoverable error" (`'NoneType' object has no attribute 'hostname'`) on every
Redis restart, and the supervisor's restart took 2 s on a quiet machine and 20 s on a busy one.
With Redis gone the restore cannot succeed anyway: it fails as a connection error, which the
close ignores. The messages stay in Redis's unacked set, delivered again after the visibility
timeout, as when a worker is killed.
"""

from kombu.transport import redis


class QoS(redis.QoS):
    def restore_unacked(self, client=None):
        if self.channel.connection.client is None:  # the connection was collected
            raise ConnectionError("broker connection gone: unacknowledged messages wait for the visibility timeout")
        return super().restore_unacked(client)


class Channel(redis.Channel):
    QoS = QoS


class Transport(redis.Transport):
    Channel = Channel

"""Reads an MCAP file with the mcap package, MCAP's own reader, and prints as JSON what a
user of it sees: the channels, every message (channel, sequence, log and publish time,
length), the metadata records, the summary's statistics and chunk indexes, and what a
seek by time returns (the messages of the middle message's time, found through the index).
Each channel's message data, concatenated, goes to OUT_DIR/channel-ID.bin. Used by
crates/nvrec-cli/tests/export.rs.

usage: mcap_read.py FILE OUT_DIR
"""

import json
import os
import sys

from mcap.reader import make_reader


def main():
    path, out_dir = sys.argv[1], sys.argv[2]
    messages, data = [], {}
    with open(path, "rb") as stream:
        reader = make_reader(stream)
        summary = reader.get_summary()
        channels = {
            str(c.id): {"topic": c.topic, "encoding": c.message_encoding, "metadata": c.metadata}
            for c in summary.channels.values()
        }
        for _, channel, message in reader.iter_messages(log_time_order=False):
            messages.append([channel.id, message.sequence, message.log_time, message.publish_time, len(message.data)])
            data.setdefault(channel.id, []).append(message.data)
        metadata = [{"name": m.name, **m.metadata} for m in reader.iter_metadata()]
        middle = messages[len(messages) // 2][2] if messages else 0
        sought = [
            [channel.id, message.sequence, message.log_time]
            for _, channel, message in reader.iter_messages(starting_at=middle, ending_before=middle + 1)
        ]
    for channel_id, parts in data.items():
        with open(os.path.join(out_dir, f"channel-{channel_id}.bin"), "wb") as out:
            out.write(b"".join(parts))
    print(
        json.dumps(
            {
                "channels": channels,
                "messages": messages,
                "metadata": metadata,
                "message_count": summary.statistics.message_count,
                "chunk_count": len(summary.chunk_indexes),
                "compression": sorted({c.compression for c in summary.chunk_indexes}),
                "seek_time": middle,
                "sought": sought,
            }
        )
    )


if __name__ == "__main__":
    main()

// A shim for the reference Kafka Connect worker only, never for pgoutbox: Confluent's
// ProtobufConverter 7.0.16 writes its message indexes with org.apache.kafka.common.utils.ByteUtils,
// which Kafka 4.4 moved to ...utils.internals. Connect loads org.apache.kafka.common classes from
// the worker's classpath, not from a plugin, so scripts/lib.sh connect_start puts this class there
// when the converter is installed. Written from the encoding's definition: Protobuf's zig-zag
// varints (ZigZag encoding, then base-128 groups, least significant first).
package org.apache.kafka.common.utils;

import java.nio.ByteBuffer;

public final class ByteUtils {
    private ByteUtils() {}

    public static void writeVarint(int value, ByteBuffer buffer) {
        int zigzag = (value << 1) ^ (value >> 31);
        while ((zigzag & ~0x7f) != 0) {
            buffer.put((byte) ((zigzag & 0x7f) | 0x80));
            zigzag >>>= 7;
        }
        buffer.put((byte) zigzag);
    }

    public static int readVarint(ByteBuffer buffer) {
        int raw = 0;
        for (int shift = 0; shift < 35; shift += 7) {
            byte b = buffer.get();
            raw |= (b & 0x7f) << shift;
            if ((b & 0x80) == 0) {
                return (raw >>> 1) ^ -(raw & 1);
            }
        }
        throw new IllegalArgumentException("a varint longer than 5 bytes");
    }

    public static int sizeOfVarint(int value) {
        int zigzag = (value << 1) ^ (value >> 31);
        int bytes = 1;
        while ((zigzag & ~0x7f) != 0) {
            bytes++;
            zigzag >>>= 7;
        }
        return bytes;
    }
}

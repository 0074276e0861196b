package io.gradsync.aeron;

import java.io.FileDescriptor;
import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.channels.DatagramChannel;
import java.util.Locale;

/**
 * Linux socket options that {@code java.nio} has no name for (UDP segmentation and receive offload, the path
 * MTU), set and read on a {@link DatagramChannel}'s socket through the JDK's own {@code setsockopt} and
 * {@code getsockopt} calls in {@code sun.nio.ch.Net}. That needs {@code java.base/sun.nio.ch} opened to
 * gradsync ({@code --add-opens java.base/sun.nio.ch=ALL-UNNAMED}, as Aeron's own documentation asks for);
 * {@link #unavailable()} says why not where it is not. Used at set-up only: each call allocates.
 */
final class DatagramSockets {
    static final int IPPROTO_IP = 0;
    static final int IPPROTO_UDP = 17;
    static final int IPPROTO_IPV6 = 41;
    static final int IP_MTU = 14;
    static final int IPV6_MTU = 24;
    static final int UDP_SEGMENT = 103;
    static final int UDP_GRO = 104;

    private static final Method FD;
    private static final Method SET;
    private static final Method GET;
    private static final String UNAVAILABLE;

    static {
        Method fd = null;
        Method set = null;
        Method get = null;
        String unavailable = null;
        if (!System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux")) {
            unavailable = "UDP segmentation offload is Linux's, and this is " + System.getProperty("os.name");
        } else {
            try {
                fd = Class.forName("sun.nio.ch.SelChImpl").getMethod("getFD");
                set = Class.forName("sun.nio.ch.Net").getDeclaredMethod("setIntOption0", FileDescriptor.class,
                        boolean.class, int.class, int.class, int.class, boolean.class);
                get = Class.forName("sun.nio.ch.Net").getDeclaredMethod("getIntOption0", FileDescriptor.class,
                        boolean.class, int.class, int.class);
                fd.setAccessible(true);
                set.setAccessible(true);
                get.setAccessible(true);
            } catch (ReflectiveOperationException | RuntimeException e) {
                Module module = DatagramSockets.class.getModule();
                unavailable = "the JVM does not open java.base/sun.nio.ch to gradsync (run Java with --add-opens "
                        + "java.base/sun.nio.ch=" + (module.isNamed() ? module.getName() : "ALL-UNNAMED") + "): " + e;
            }
        }
        FD = fd;
        SET = set;
        GET = get;
        UNAVAILABLE = unavailable;
    }

    private DatagramSockets() {
    }

    /** Why these options cannot be reached in this JVM, or null if they can. */
    static String unavailable() {
        return UNAVAILABLE;
    }

    /** {@code setsockopt(level, option, value)} with an int value. */
    static void set(DatagramChannel channel, int level, int option, int value) throws IOException {
        invoke(SET, null, descriptor(channel), false, level, option, value, false);
    }

    /** {@code getsockopt(level, option)} of an int option. */
    static int get(DatagramChannel channel, int level, int option) throws IOException {
        return (Integer) invoke(GET, null, descriptor(channel), false, level, option);
    }

    /** The MTU the kernel knows for the path of a connected socket (its route's, or a smaller one it learnt). */
    static int pathMtu(DatagramChannel channel, boolean ipv6) throws IOException {
        return ipv6 ? get(channel, IPPROTO_IPV6, IPV6_MTU) : get(channel, IPPROTO_IP, IP_MTU);
    }

    private static FileDescriptor descriptor(DatagramChannel channel) throws IOException {
        return (FileDescriptor) invoke(FD, channel);
    }

    private static Object invoke(Method method, Object target, Object... arguments) throws IOException {
        if (UNAVAILABLE != null) {
            throw new IOException(UNAVAILABLE);
        }
        try {
            return method.invoke(target, arguments);
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof IOException io) {
                throw io;
            }
            throw new IOException(e.getCause());
        } catch (IllegalAccessException e) {
            throw new IOException(e);
        }
    }
}

package io.gradsync.djl;

import ai.djl.Device;
import ai.djl.ndarray.NDArray;
import ai.djl.nn.Parameter;
import ai.djl.training.Trainer;
import ai.djl.training.optimizer.Optimizer;
import io.gradsync.core.Communicator;
import io.gradsync.core.GradientBuffer;
import java.lang.reflect.Field;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * What a trainer's DJL optimizer keeps between steps, made one rank's on every rank: the update counts (the step a
 * learning-rate schedule and Adam's bias correction read) and every per-parameter state array (momentum, Adam's means
 * and variances). DJL has no API for either, so they are read from the fields DJL's optimizers keep them in: the
 * counts in {@link Optimizer}'s, the arrays in each field of type {@code Map<String, Map<Device, NDArray>>} of the
 * optimizer's class and its superclasses (every built-in optimizer keeps its state so), keyed by parameter id. Ids are
 * random per process, so a parameter is known by its place in the model's order instead.
 */
final class OptimizerState {
    private final Optimizer optimizer;
    private final List<Field> states = new ArrayList<>();
    private final Field numUpdate;
    private final Field updateCounts;

    private OptimizerState(Optimizer optimizer) {
        this.optimizer = optimizer;
        try {
            numUpdate = accessible(Optimizer.class.getDeclaredField("numUpdate"));
            updateCounts = accessible(Optimizer.class.getDeclaredField("updateCounts"));
            for (Class<?> c = optimizer.getClass(); c != Object.class; c = c.getSuperclass()) {
                List<Field> own = new ArrayList<>();
                for (Field f : c.getDeclaredFields()) {
                    if (isStateMap(f.getGenericType())) {
                        own.add(accessible(f));
                    }
                }
                own.sort(Comparator.comparing(Field::getName));
                states.addAll(own);
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new IllegalStateException("cannot read the state of the optimizer " + optimizer.getClass().getName()
                    + " to bring a restarted rank up to date (DJL keeps it in private fields; this DJL is not the one "
                    + "DataParallel knows, or its classes are on the module path): " + e, e);
        }
    }

    /** The state of {@code trainer}'s optimizer, found through the trainer's parameter store and server. */
    static OptimizerState of(Trainer trainer) {
        Object store = read(trainer, Trainer.class, "parameterStore");
        Object server = read(store, store.getClass(), "parameterServer");
        Object optimizer = read(server, server.getClass(), "optimizer");
        if (!(optimizer instanceof Optimizer o)) {
            throw new IllegalStateException("the trainer's parameter server " + server.getClass().getName() + " holds no "
                    + "DJL optimizer to bring a restarted rank up to date with");
        }
        return new OptimizerState(o);
    }

    /**
     * Makes the optimizer's state rank {@code root}'s on every rank, for {@code parameters} (the model's, in its order):
     * first which parameters have which state and their update counts, then each state array.
     */
    void broadcast(Communicator comm, int root, List<Parameter> parameters) {
        int n = parameters.size();
        long[] layout = new long[2 + n + states.size() * n];
        layout[0] = kind();
        layout[1] = readInt(numUpdate);
        Map<String, Integer> counts = readMap(updateCounts);
        for (int i = 0; i < n; i++) {
            Integer count = counts.get(parameters.get(i).getId());
            layout[2 + i] = count == null ? -1 : count;
        }
        for (int f = 0; f < states.size(); f++) {
            Map<String, Map<Device, NDArray>> state = readMap(states.get(f));
            for (int i = 0; i < n; i++) {
                Map<Device, NDArray> arrays = state.get(parameters.get(i).getId());
                layout[2 + n + f * n + i] = arrays == null || arrays.isEmpty() ? 0 : 1;
            }
        }
        long mine = layout[0];
        comm.broadcastBlocking(GradientBuffer.wrap(layout), root);
        if (layout[0] != mine) {
            throw new IllegalStateException("rank " + comm.rank() + ": the ranks' optimizers keep different state (this "
                    + "rank's " + optimizer.getClass().getName() + " another than rank " + root + "'s): every rank must "
                    + "train with the same optimizer");
        }
        write(numUpdate, (int) layout[1]);
        counts.clear();
        for (int i = 0; i < n; i++) {
            if (layout[2 + i] >= 0) {
                counts.put(parameters.get(i).getId(), (int) layout[2 + i]);
            }
        }
        for (int f = 0; f < states.size(); f++) {
            Map<String, Map<Device, NDArray>> state = readMap(states.get(f));
            for (int i = 0; i < n; i++) {
                Parameter p = parameters.get(i);
                if (layout[2 + n + f * n + i] == 0) {
                    state.remove(p.getId());
                    continue;
                }
                NDArray weight = p.getArray();
                NDArray array = state.computeIfAbsent(p.getId(), k -> new ConcurrentHashMap<>())
                        .computeIfAbsent(weight.getDevice(), d -> weight.zerosLike());
                ModelParameters.broadcast(comm, array, root, states.get(f).getName() + " of " + p.getName());
            }
        }
    }

    /** The optimizer's class and the names of its state fields, as one number to compare across ranks. */
    private long kind() {
        long h = optimizer.getClass().getName().hashCode();
        for (Field f : states) {
            h = 31 * h + f.getName().hashCode();
        }
        return h;
    }

    private static boolean isStateMap(Type type) {
        if (!(type instanceof ParameterizedType map) || map.getRawType() != Map.class
                || map.getActualTypeArguments()[0] != String.class) {
            return false;
        }
        Type inner = map.getActualTypeArguments()[1];
        return inner instanceof ParameterizedType perDevice && perDevice.getRawType() == Map.class
                && perDevice.getActualTypeArguments()[0] == Device.class && perDevice.getActualTypeArguments()[1] == NDArray.class;
    }

    private static Field accessible(Field f) {
        f.setAccessible(true);
        return f;
    }

    private static Object read(Object from, Class<?> type, String name) {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            try {
                return accessible(c.getDeclaredField(name)).get(from);
            } catch (NoSuchFieldException e) {
                // a superclass may declare it
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new IllegalStateException("cannot reach the trainer's optimizer (" + type.getName() + "." + name
                        + ") to bring a restarted rank up to date: " + e, e);
            }
        }
        throw new IllegalStateException("cannot reach the trainer's optimizer to bring a restarted rank up to date: "
                + type.getName() + " has no field " + name + " (a DJL other than the one DataParallel knows)");
    }

    private int readInt(Field f) {
        try {
            return f.getInt(optimizer);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    private void write(Field f, int value) {
        try {
            f.setInt(optimizer, value);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    @SuppressWarnings("unchecked")
    private <K, V> Map<K, V> readMap(Field f) {
        try {
            return (Map<K, V>) f.get(optimizer);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }
}

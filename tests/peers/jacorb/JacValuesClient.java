// A JacORB client of Values::Echo (idl/values.idl) written as JacORB's IDL
// compiler would write its stub: each call writes its arguments to the request
// stream and reads its result from the reply stream, with the value classes of
// JacValues.java.  Prints one JSON line per case, as JacClient.java; each
// line's detail says what came back, and its "ok" what JacORB checked
// (class, state, and == identity for sharing).
//
//   java -cp LIB/*:. JacValuesClient TARGET GIOP_MINOR
import java.io.Serializable;
import java.util.function.Function;

import org.omg.CORBA.ORB;
import org.omg.CORBA.portable.ApplicationException;
import org.omg.CORBA.portable.InputStream;
import org.omg.CORBA.portable.ObjectImpl;
import org.omg.CORBA.portable.OutputStream;
import org.omg.CORBA.portable.RemarshalException;

public final class JacValuesClient {
    private static ObjectImpl target;

    public static void main(String[] args) {
        ORB orb = JacPeer.init(args[1], false);
        JacValues.register(orb);
        target = (ObjectImpl) orb.string_to_object(args[0]);
        JacValues.Point p = new JacValues.Point(1, -2, "n\u00e9v");
        JacValues.Point other = new JacValues.Point(3, 4, "o");
        run("point", () -> {
            JacValues.Point got = point("point", p);
            check("point", got, got.getClass() == JacValues.Point.class && got.x == 1 && got.y == -2
                  && got.name.equals("n\u00e9v"));
        });
        run("derived", () -> {
            JacValues.Point got = point("derived", new JacValues.Point3(1, 2, "d", 3.5));
            check("derived", got, got instanceof JacValues.Point3 && ((JacValues.Point3) got).z == 3.5);
        });
        run("truncatable", () -> {
            JacValues.Point got = point("truncatable", new JacValues.Tagged(1, 2, "t", "tag"));
            check("truncatable", got, got.getClass() == JacValues.Tagged.class
                  && ((JacValues.Tagged) got).tag.equals("tag"));
        });
        // The receiver knows no Stamped: it reads the chunked value as the Tagged it starts with.
        run("truncated", () -> {
            JacValues.Point got = point("truncated", new JacValues.Stamped(5, 6, "s", "stamped", 1L << 40));
            check("truncated", got, got.getClass() == JacValues.Tagged.class && got.x == 5 && got.name.equals("s")
                  && ((JacValues.Tagged) got).tag.equals("stamped"));
        });
        run("null", () -> {
            JacValues.Point got = point("null", null);
            check("null", got, got == null);
        });
        run("shared", () -> {
            JacValues.Point[] points = call("shared", "echo_points",
                out -> JacValues.writePoints(out, new JacValues.Point[] {p, p, other}), JacValues::readPoints);
            check("shared", points, points.length == 3 && points[0] == points[1] && points[0] != points[2]
                  && points[0].name.equals("n\u00e9v") && points[2].name.equals("o"));
        });
        // 600 values past 8 KiB, two of every three a Stamped the receiver truncates, every third one object.
        run("many", () -> {
            JacValues.Point[] sent = new JacValues.Point[600];
            for (int k = 0; k < sent.length; k++) {
                sent[k] = k % 3 == 0 ? p : new JacValues.Stamped(k, k, "p" + k, "t" + k, k);
            }
            JacValues.Point[] points = call("many", "echo_points", out -> JacValues.writePoints(out, sent),
                                            JacValues::readPoints);
            check("many", points.length + " values", points.length == 600 && points[0] == points[597]
                  && points[599].getClass() == JacValues.Tagged.class
                  && ((JacValues.Tagged) points[599]).tag.equals("t599"));
        });
        run("twice", () -> {
            JacValues.Point[] points = call("twice", "echo_twice", out -> out(out).write_value(p, JacValues.POINT),
                                            JacValues::readPoints);
            check("twice", points, points.length == 2 && points[0] == points[1] && points[0].x == 1);
        });
        run("secret", () -> {
            JacValues.Secret secret = call("secret", "echo_secret",
                out -> out(out).write_value(new JacValues.Secret(1.5, (byte) 7), JacValues.SECRET),
                in -> (JacValues.Secret) in(in).read_value(JacValues.SECRET));
            check("secret", secret, secret.key() == 1.5 && secret.tag == 7);
        });
        run("chain", () -> {
            JacValues.Node chain = node("chain", new JacValues.Node(1, null));
            check("chain", chain, chain.id == 1 && chain.next == null);
        });
        run("cycle", () -> {
            JacValues.Node first = new JacValues.Node(1, null);
            first.next = new JacValues.Node(2, first);
            JacValues.Node cycle = node("cycle", first);
            check("cycle", cycle, cycle.id == 1 && cycle.next != null && cycle.next.id == 2
                  && cycle.next.next == cycle);
        });
        run("holder", () -> {
            Object[] holder = call("holder", "echo_holder", out -> {
                out.write_octet((byte) 1);
                out(out).write_value(p, JacValues.POINT);
                out(out).write_value("l", new JacValues.LabelHelper());
            }, in -> new Object[] {in.read_octet(), in(in).read_value(JacValues.POINT),
                                    in(in).read_value(new JacValues.LabelHelper())});
            check("holder", holder, (Byte) holder[0] == 1 && ((JacValues.Point) holder[1]).name.equals("n\u00e9v")
                  && holder[2].equals("l"));
        });
        run("label", () -> {
            String label = (String) box("label", "echo_label", "l\u00e1bel", new JacValues.LabelHelper());
            check("label", label, "l\u00e1bel".equals(label));
        });
        run("null_label", () -> {
            String label = (String) box("null_label", "echo_label", null, new JacValues.LabelHelper());
            check("null_label", label, label == null);
        });
        run("wlabel", () -> {
            String label = (String) box("wlabel", "echo_wlabel", "w\u00e9 \u20ac \u4e2d", new JacValues.WLabelHelper());
            check("wlabel", label, "w\u00e9 \u20ac \u4e2d".equals(label));
        });
        run("longs", () -> {
            JacValues.LongsBox longs = (JacValues.LongsBox) box("longs", "echo_longs",
                new JacValues.LongsBox(new int[] {1, 2, 3}), new JacValues.LongsBoxHelper());
            check("longs", java.util.Arrays.toString(longs.value),
                  java.util.Arrays.equals(longs.value, new int[] {1, 2, 3}));
        });
        run("pair", () -> {
            JacValues.Pair pair = (JacValues.Pair) box("pair", "echo_pair", new JacValues.Pair(4, 5.5),
                                                       new JacValues.PairBoxHelper());
            check("pair", pair.a + ", " + pair.b, pair.a == 4 && pair.b == 5.5);
        });
        run("any", () -> {
            // Built from a stream, as a generated Helper's insert does: JacORB's Any.insert_Value
            // asks its RMI value handler for the class's repository id, which fails on Java 9+.
            org.omg.CORBA.Any any = orb.create_any();
            OutputStream state = any.create_output_stream();
            out(state).write_value(new JacValues.Point3(1, 2, "d", 3.5), JacValues.POINT);
            any.read_value(state.create_input_stream(), JacValues.pointType(orb));
            org.omg.CORBA.Any echoed = call("any", "echo_anything", out -> out.write_any(any), InputStream::read_any);
            Serializable got = echoed.extract_Value();
            check("any", got, got instanceof JacValues.Point3 && ((JacValues.Point3) got).z == 3.5);
        });
        // Derived values, so that the echo carries their repository ids: JacORB cannot read a
        // value in an any without one (MARSHAL "missing value type information").
        run("any_points", () -> {
            org.omg.CORBA.Any any = orb.create_any();
            OutputStream state = any.create_output_stream();
            JacValues.Point3 d = new JacValues.Point3(7, 8, "in any", 0.25);
            JacValues.writePoints(state, new JacValues.Point[] {d, d, new JacValues.Tagged(1, 2, "t", "any tag")});
            any.read_value(state.create_input_stream(), JacValues.pointsType(orb));
            org.omg.CORBA.Any echoed = call("any_points", "echo_anything", out -> out.write_any(any),
                                            InputStream::read_any);
            JacValues.Point[] points = JacValues.readPoints(echoed.create_input_stream());
            check("any_points", points, points.length == 3 && points[0] == points[1]
                  && points[0] instanceof JacValues.Point3 && ((JacValues.Point3) points[0]).z == 0.25
                  && points[2] instanceof JacValues.Tagged && ((JacValues.Tagged) points[2]).tag.equals("any tag"));
        });
        orb.shutdown(false);
    }

    /** Runs one case; a case that fails before its check is reported failed with what was raised. */
    private static void run(String name, Runnable body) {
        try {
            body.run();
        } catch (Failed reported) {
            // call() has reported it
        } catch (RuntimeException | LinkageError exc) {
            report(name, false, exc.toString());
        }
    }

    private interface Writer {
        void write(OutputStream out);
    }

    private static JacValues.Point point(String name, JacValues.Point value) {
        return call(name, "echo_point", out -> out(out).write_value(value, JacValues.POINT),
                    in -> (JacValues.Point) in(in).read_value(JacValues.POINT));
    }

    private static JacValues.Node node(String name, JacValues.Node value) {
        return call(name, "echo_chain", out -> out(out).write_value(value, JacValues.NODE),
                    in -> (JacValues.Node) in(in).read_value(JacValues.NODE));
    }

    private static Serializable box(String name, String operation, Serializable value,
                                    org.omg.CORBA.portable.BoxedValueHelper helper) {
        return call(name, operation, out -> out(out).write_value(value, helper), in -> in(in).read_value(helper));
    }

    /** One call; what fails is reported under ``name`` and ends the case with {@link Failed}. */
    private static <T> T call(String name, String operation, Writer args, Function<InputStream, T> result) {
        InputStream in = null;
        try {
            OutputStream out = target._request(operation, true);
            args.write(out);
            in = target._invoke(out);
            return result.apply(in);
        } catch (ApplicationException | RemarshalException | RuntimeException | LinkageError exc) {
            report(name, false, exc.toString());
            throw new Failed();
        } finally {
            target._releaseReply(in);
        }
    }

    private static final class Failed extends RuntimeException {
    }

    private static org.omg.CORBA_2_3.portable.InputStream in(InputStream in) {
        return JacValues.in(in);
    }

    private static org.omg.CORBA_2_3.portable.OutputStream out(OutputStream out) {
        return JacValues.out(out);
    }

    private static void check(String name, Object got, boolean ok) {
        report(name, ok, describe(got));
    }

    private static String describe(Object got) {
        if (got instanceof Object[]) {
            return java.util.Arrays.toString((Object[]) got);
        }
        if (got instanceof JacValues.Node) {
            JacValues.Node node = (JacValues.Node) got;
            return "Node(" + node.id + " -> " + (node.next == null ? "null" : String.valueOf(node.next.id)) + ")";
        }
        return String.valueOf(got);
    }

    private static void report(String name, boolean ok, String detail) {
        JacPeer.report(name, ok, detail);
    }
}

// Hand-written Java classes of the value types of idl/values.idl (what JacORB's
// IDL compiler would generate: a StreamableValue per value type, a factory per
// repository id, a BoxedValueHelper per box), shared by JacValuesServer and
// JacValuesClient.  Stamped is known to JacORB only: a truncatable value whose
// receiver must fall back to Tagged.
import java.io.Serializable;

import org.omg.CORBA.ORB;
import org.omg.CORBA.TypeCode;
import org.omg.CORBA.portable.BoxedValueHelper;
import org.omg.CORBA.portable.InputStream;
import org.omg.CORBA.portable.OutputStream;
import org.omg.CORBA.portable.StreamableValue;
import org.omg.CORBA.portable.ValueFactory;

public final class JacValues {
    static final String POINT = "IDL:Values/Point:1.0";
    static final String POINT3 = "IDL:Values/Point3:1.0";
    static final String TAGGED = "IDL:Values/Tagged:1.0";
    static final String STAMPED = "IDL:Values/Stamped:1.0";
    static final String SECRET = "IDL:Values/Secret:1.0";
    static final String NODE = "IDL:Values/Node:1.0";
    static final String LABEL = "IDL:Values/Label:1.0";
    static final String LONGS_BOX = "IDL:Values/LongsBox:1.0";
    static final String PAIR_BOX = "IDL:Values/PairBox:1.0";

    private JacValues() {
    }

    /** Registers a factory for every value type above on ``orb``. */
    static void register(ORB orb) {
        org.omg.CORBA_2_3.ORB values = (org.omg.CORBA_2_3.ORB) orb;
        values.register_value_factory(POINT, in -> read(in, new Point()));
        values.register_value_factory(POINT3, in -> read(in, new Point3()));
        values.register_value_factory(TAGGED, in -> read(in, new Tagged()));
        values.register_value_factory(STAMPED, in -> read(in, new Stamped()));
        values.register_value_factory(SECRET, in -> read(in, new Secret()));
        values.register_value_factory(NODE, in -> read(in, new Node()));
    }

    // The standard form of a factory: the stream registers the new object (so
    // an indirection inside its own state finds it), then reads its state.
    private static Serializable read(org.omg.CORBA_2_3.portable.InputStream in, Serializable value) {
        return in.read_value(value);
    }

    static org.omg.CORBA_2_3.portable.InputStream in(InputStream in) {
        return (org.omg.CORBA_2_3.portable.InputStream) in;
    }

    static org.omg.CORBA_2_3.portable.OutputStream out(OutputStream out) {
        return (org.omg.CORBA_2_3.portable.OutputStream) out;
    }

    /** valuetype Point { public long x; public long y; public string name; }; */
    static class Point implements StreamableValue {
        int x;
        int y;
        String name;

        Point() {
        }

        Point(int x, int y, String name) {
            this.x = x;
            this.y = y;
            this.name = name;
        }

        @Override
        public void _read(InputStream in) {
            x = in.read_long();
            y = in.read_long();
            name = in.read_string();
        }

        @Override
        public void _write(OutputStream out) {
            out.write_long(x);
            out.write_long(y);
            out.write_string(name);
        }

        @Override
        public String[] _truncatable_ids() {
            return new String[] {POINT};
        }

        @Override
        public TypeCode _type() {
            return null;  // not put in anys by these peers
        }

        @Override
        public String toString() {
            return getClass().getSimpleName() + "(" + x + ", " + y + ", " + name + ")";
        }
    }

    /** valuetype Point3 : Point { public double z; }; */
    static final class Point3 extends Point {
        double z;

        Point3() {
        }

        Point3(int x, int y, String name, double z) {
            super(x, y, name);
            this.z = z;
        }

        @Override
        public void _read(InputStream in) {
            super._read(in);
            z = in.read_double();
        }

        @Override
        public void _write(OutputStream out) {
            super._write(out);
            out.write_double(z);
        }

        @Override
        public String[] _truncatable_ids() {
            return new String[] {POINT3};
        }
    }

    /** valuetype Tagged : truncatable Point { public string tag; }; */
    static class Tagged extends Point {
        String tag;

        Tagged() {
        }

        Tagged(int x, int y, String name, String tag) {
            super(x, y, name);
            this.tag = tag;
        }

        @Override
        public void _read(InputStream in) {
            super._read(in);
            tag = in.read_string();
        }

        @Override
        public void _write(OutputStream out) {
            super._write(out);
            out.write_string(tag);
        }

        @Override
        public String[] _truncatable_ids() {
            return new String[] {TAGGED, POINT};
        }
    }

    /** valuetype Stamped : truncatable Tagged { public long long stamp; }; (not in idl/values.idl) */
    static final class Stamped extends Tagged {
        long stamp;

        Stamped() {
        }

        Stamped(int x, int y, String name, String tag, long stamp) {
            super(x, y, name, tag);
            this.stamp = stamp;
        }

        @Override
        public void _read(InputStream in) {
            super._read(in);
            stamp = in.read_longlong();
        }

        @Override
        public void _write(OutputStream out) {
            super._write(out);
            out.write_longlong(stamp);
        }

        @Override
        public String[] _truncatable_ids() {
            return new String[] {STAMPED, TAGGED, POINT};
        }
    }

    /** valuetype Secret { private double key; public octet tag; }; */
    static final class Secret implements StreamableValue {
        private double key;
        byte tag;

        Secret() {
        }

        Secret(double key, byte tag) {
            this.key = key;
            this.tag = tag;
        }

        double key() {
            return key;
        }

        @Override
        public void _read(InputStream in) {
            key = in.read_double();
            tag = in.read_octet();
        }

        @Override
        public void _write(OutputStream out) {
            out.write_double(key);
            out.write_octet(tag);
        }

        @Override
        public String[] _truncatable_ids() {
            return new String[] {SECRET};
        }

        @Override
        public TypeCode _type() {
            return null;
        }
    }

    /** valuetype Node { public long id; public Node next; }; */
    static final class Node implements StreamableValue {
        int id;
        Node next;

        Node() {
        }

        Node(int id, Node next) {
            this.id = id;
            this.next = next;
        }

        @Override
        public void _read(InputStream in) {
            id = in.read_long();
            next = (Node) in(in).read_value(NODE);
        }

        @Override
        public void _write(OutputStream out) {
            out.write_long(id);
            out(out).write_value(next, NODE);
        }

        @Override
        public String[] _truncatable_ids() {
            return new String[] {NODE};
        }

        @Override
        public TypeCode _type() {
            return null;
        }
    }

    /** valuetype LongsBox sequence<long>; (through Longs) */
    static final class LongsBox implements org.omg.CORBA.portable.ValueBase {
        int[] value;

        LongsBox(int[] value) {
            this.value = value;
        }

        @Override
        public String[] _truncatable_ids() {
            return new String[] {LONGS_BOX};
        }
    }

    /** struct Pair { long a; double b; }; boxed as PairBox */
    static final class Pair implements org.omg.CORBA.portable.IDLEntity {
        int a;
        double b;

        Pair(int a, double b) {
            this.a = a;
            this.b = b;
        }
    }

    /** valuetype Label string; */
    static final class LabelHelper implements BoxedValueHelper {
        @Override
        public Serializable read_value(InputStream in) {
            return in.read_string();
        }

        @Override
        public void write_value(OutputStream out, Serializable value) {
            out.write_string((String) value);
        }

        @Override
        public String get_id() {
            return LABEL;
        }
    }

    /** valuetype WLabel wstring; (its GIOP 1.1 form is not its GIOP 1.2 form) */
    static final class WLabelHelper implements BoxedValueHelper {
        @Override
        public Serializable read_value(InputStream in) {
            return in.read_wstring();
        }

        @Override
        public void write_value(OutputStream out, Serializable value) {
            out.write_wstring((String) value);
        }

        @Override
        public String get_id() {
            return "IDL:Values/WLabel:1.0";
        }
    }

    static final class LongsBoxHelper implements BoxedValueHelper {
        @Override
        public Serializable read_value(InputStream in) {
            int[] longs = new int[in.read_ulong()];
            in.read_long_array(longs, 0, longs.length);
            return new LongsBox(longs);
        }

        @Override
        public void write_value(OutputStream out, Serializable value) {
            int[] longs = ((LongsBox) value).value;
            out.write_ulong(longs.length);
            out.write_long_array(longs, 0, longs.length);
        }

        @Override
        public String get_id() {
            return LONGS_BOX;
        }
    }

    static final class PairBoxHelper implements BoxedValueHelper {
        @Override
        public Serializable read_value(InputStream in) {
            return new Pair(in.read_long(), in.read_double());
        }

        @Override
        public void write_value(OutputStream out, Serializable value) {
            Pair pair = (Pair) value;
            out.write_long(pair.a);
            out.write_double(pair.b);
        }

        @Override
        public String get_id() {
            return PAIR_BOX;
        }
    }

    /** The TypeCode of Point, as a generated PointHelper.type() builds it. */
    static TypeCode pointType(ORB orb) {
        TypeCode tcLong = orb.get_primitive_tc(org.omg.CORBA.TCKind.tk_long);
        org.omg.CORBA.ValueMember[] members = {
            member("x", tcLong), member("y", tcLong),
            member("name", orb.get_primitive_tc(org.omg.CORBA.TCKind.tk_string)),
        };
        return orb.create_value_tc(POINT, "Point", org.omg.CORBA.VM_NONE.value, null, members);
    }

    /** The TypeCode of Points (typedef sequence<Point> Points). */
    static TypeCode pointsType(ORB orb) {
        return orb.create_alias_tc("IDL:Values/Points:1.0", "Points", orb.create_sequence_tc(0, pointType(orb)));
    }

    private static org.omg.CORBA.ValueMember member(String name, TypeCode type) {
        return new org.omg.CORBA.ValueMember(name, "", "", "", type, null, org.omg.CORBA.PUBLIC_MEMBER.value);
    }

    static Point[] readPoints(InputStream in) {
        Point[] points = new Point[in.read_ulong()];
        for (int i = 0; i < points.length; i++) {
            points[i] = (Point) in(in).read_value(POINT);
        }
        return points;
    }

    static void writePoints(OutputStream out, Point[] points) {
        out.write_ulong(points.length);
        for (Point point : points) {
            out(out).write_value(point, POINT);
        }
    }
}

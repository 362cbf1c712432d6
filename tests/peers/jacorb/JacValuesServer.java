// A JacORB server of Values::Echo (idl/values.idl) written as JacORB's IDL
// compiler would write its skeleton: an InvokeHandler that reads the arguments
// from the request stream and writes the result to the reply stream, with the
// value classes of JacValues.java.  Every operation answers with what it read,
// so sharing and derivation come back only if JacORB kept them.  Prints its
// IOR, serves until stdin closes.
//
//   java -cp LIB/*:. JacValuesServer GIOP_MINOR
import java.io.Serializable;

import org.omg.CORBA.BAD_OPERATION;
import org.omg.CORBA.ORB;
import org.omg.CORBA.portable.InputStream;
import org.omg.CORBA.portable.InvokeHandler;
import org.omg.CORBA.portable.OutputStream;
import org.omg.CORBA.portable.ResponseHandler;
import org.omg.PortableServer.POA;
import org.omg.PortableServer.Servant;

public final class JacValuesServer extends Servant implements InvokeHandler {
    @Override
    public String[] _all_interfaces(POA poa, byte[] oid) {
        return new String[] {"IDL:Values/Echo:1.0"};
    }

    @Override
    public OutputStream _invoke(String operation, InputStream in, ResponseHandler handler) {
        org.omg.CORBA_2_3.portable.InputStream args = JacValues.in(in);
        switch (operation) {
            case "echo_point": return echo(handler, args.read_value(JacValues.POINT), JacValues.POINT);
            case "echo_secret": return echo(handler, args.read_value(JacValues.SECRET), JacValues.SECRET);
            case "echo_chain": return echo(handler, args.read_value(JacValues.NODE), JacValues.NODE);
            case "echo_label": return box(handler, args, new JacValues.LabelHelper());
            case "echo_wlabel": return box(handler, args, new JacValues.WLabelHelper());
            case "echo_longs": return box(handler, args, new JacValues.LongsBoxHelper());
            case "echo_pair": return box(handler, args, new JacValues.PairBoxHelper());
            case "echo_points": {
                JacValues.Point[] points = JacValues.readPoints(in);
                OutputStream out = handler.createReply();
                JacValues.writePoints(out, points);
                return out;
            }
            case "echo_twice": {
                JacValues.Point point = (JacValues.Point) args.read_value(JacValues.POINT);
                OutputStream out = handler.createReply();
                JacValues.writePoints(out, new JacValues.Point[] {point, point});
                return out;
            }
            case "echo_holder": {  // struct Holder { octet flag; Point p; Label l; }
                byte flag = in.read_octet();
                Serializable point = args.read_value(JacValues.POINT);
                Serializable label = args.read_value(new JacValues.LabelHelper());
                OutputStream out = handler.createReply();
                out.write_octet(flag);
                JacValues.out(out).write_value(point, JacValues.POINT);
                JacValues.out(out).write_value(label, new JacValues.LabelHelper());
                return out;
            }
            case "echo_anything": {
                org.omg.CORBA.Any any = in.read_any();
                OutputStream out = handler.createReply();
                out.write_any(any);
                return out;
            }
            default: throw new BAD_OPERATION(operation);
        }
    }

    private static OutputStream echo(ResponseHandler handler, Serializable value, String id) {
        OutputStream out = handler.createReply();
        JacValues.out(out).write_value(value, id);
        return out;
    }

    private static OutputStream box(ResponseHandler handler, org.omg.CORBA_2_3.portable.InputStream in,
                                    org.omg.CORBA.portable.BoxedValueHelper helper) {
        Serializable value = in.read_value(helper);
        OutputStream out = handler.createReply();
        JacValues.out(out).write_value(value, helper);
        return out;
    }

    public static void main(String[] args) throws Exception {
        ORB orb = JacPeer.init(args[0], true);
        JacValues.register(orb);
        JacPeer.serve(orb, new JacValuesServer());
    }
}

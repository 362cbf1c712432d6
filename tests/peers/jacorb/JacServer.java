// A JacORB server of the echo operations of Interop::Types through the
// Dynamic Skeleton Interface (no IDL compiler needed).  Prints its IOR,
// serves until stdin closes.
//
//   java -cp LIB/*:. JacServer GIOP_MINOR
import org.omg.CORBA.ARG_IN;
import org.omg.CORBA.Any;
import org.omg.CORBA.BAD_OPERATION;
import org.omg.CORBA.NVList;
import org.omg.CORBA.ORB;
import org.omg.CORBA.ServerRequest;
import org.omg.CORBA.TCKind;
import org.omg.PortableServer.DynamicImplementation;
import org.omg.PortableServer.POA;

public final class JacServer extends DynamicImplementation {
    private final ORB orb;

    private JacServer(ORB orb) {
        this.orb = orb;
    }

    @Override
    public String[] _all_interfaces(POA poa, byte[] oid) {
        return new String[] {"IDL:Interop/Types:1.0"};
    }

    @Override
    public void invoke(ServerRequest request) {
        TCKind kind;
        switch (request.operation()) {
            case "echo_string": kind = TCKind.tk_string; break;
            case "echo_wstring": kind = TCKind.tk_wstring; break;
            case "echo_wchar": kind = TCKind.tk_wchar; break;
            case "echo_char": kind = TCKind.tk_char; break;
            default: throw new BAD_OPERATION(request.operation());
        }
        NVList args = orb.create_list(1);
        Any value = orb.create_any();
        value.type(orb.get_primitive_tc(kind));
        args.add_value("v", value, ARG_IN.value);
        request.arguments(args);  // fills ``value`` with the argument
        request.set_result(value);
    }

    public static void main(String[] args) throws Exception {
        ORB orb = JacPeer.init(args[0], true);
        JacPeer.serve(orb, new JacServer(orb));
    }
}

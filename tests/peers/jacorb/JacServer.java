// A JacORB server of the echo operations of Interop::Types through the
// Dynamic Skeleton Interface (no IDL compiler needed).  Prints its IOR,
// serves until stdin closes.
//
//   java -cp LIB/*:. JacServer GIOP_MINOR
import java.util.Properties;

import org.omg.CORBA.ARG_IN;
import org.omg.CORBA.Any;
import org.omg.CORBA.BAD_OPERATION;
import org.omg.CORBA.NVList;
import org.omg.CORBA.ORB;
import org.omg.CORBA.ServerRequest;
import org.omg.CORBA.TCKind;
import org.omg.PortableServer.DynamicImplementation;
import org.omg.PortableServer.POA;
import org.omg.PortableServer.POAHelper;

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
        Properties props = new Properties();
        props.setProperty("org.omg.CORBA.ORBClass", "org.jacorb.orb.ORB");
        props.setProperty("org.omg.CORBA.ORBSingletonClass", "org.jacorb.orb.ORBSingleton");
        props.setProperty("jacorb.giop_minor_version", args[0]);
        props.setProperty("OAIAddr", "127.0.0.1");
        ORB orb = ORB.init(new String[0], props);
        POA root = POAHelper.narrow(orb.resolve_initial_references("RootPOA"));
        root.the_POAManager().activate();
        org.omg.CORBA.Object ref = root.servant_to_reference(new JacServer(orb));
        System.out.println(orb.object_to_string(ref));
        System.out.flush();
        Thread serving = new Thread(orb::run);
        serving.setDaemon(true);
        serving.start();
        while (System.in.read() >= 0) {
            // serve until the test closes stdin
        }
        orb.shutdown(false);
    }
}

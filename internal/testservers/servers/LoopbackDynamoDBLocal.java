// LoopbackDynamoDBLocal starts DynamoDB Local bound to one host address.
//
// DynamoDB Local's own main (ServerRunner) has no host option: it builds a Jetty
// Server(port), which listens on every interface. This launcher builds the same server
// from the same command-line arguments, points its Jetty connector at the host given
// in the system property tenure.dynamodb.host (default 127.0.0.1) and starts it.
// It never configures telemetry (run it with -disableTelemetry).
//
// scripts/testservers.sh compiles it at install time against the pinned jar:
//
//	javac -cp 'DynamoDBLocal.jar:DynamoDBLocal_lib/*' -d OUT LoopbackDynamoDBLocal.java
//	java -Djava.library.path=DynamoDBLocal_lib -cp 'OUT:DynamoDBLocal.jar:DynamoDBLocal_lib/*' \
//	    LoopbackDynamoDBLocal -inMemory -sharedDb -disableTelemetry -port N
import java.lang.reflect.Field;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public final class LoopbackDynamoDBLocal {
    public static void main(String[] args) throws Exception {
        String host = System.getProperty("tenure.dynamodb.host", "127.0.0.1");
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        if (proxy == null) { // -help, -version or bad arguments: ServerRunner printed why
            System.exit(2);
        }
        Field f = DynamoDBProxyServer.class.getDeclaredField("server");
        f.setAccessible(true);
        Server jetty = (Server) f.get(proxy);
        int bound = 0;
        for (Connector c : jetty.getConnectors()) {
            if (c instanceof ServerConnector sc) {
                sc.setHost(host);
                bound++;
            }
        }
        if (bound == 0) {
            System.err.println("LoopbackDynamoDBLocal: no Jetty ServerConnector found; refusing to listen on all interfaces");
            System.exit(3);
        }
        proxy.start();
        System.out.println("LoopbackDynamoDBLocal: listening on " + host);
    }
}

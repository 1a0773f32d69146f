// Holder holds one Apache Curator lock for the interop suite, driven by
// the line protocol of package interop: it prints "waiting" once it asks,
// "held" once the lock is its own, releases after reading "release" (or
// end of input) and prints "released".
//
// Usage: java Holder <connect string> <path> <mutex|write|read|latch|selector>
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.RetryOneTime;

public class Holder {
    static synchronized void say(String s) {
        System.out.println(s);
        System.out.flush();
    }

    static void awaitRelease(BufferedReader in) throws Exception {
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().equals("release")) {
                return;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            say("error usage: Holder <connect> <path> <recipe>");
            System.exit(2);
        }
        String connect = args[0], path = args[1], recipe = args[2];
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 30000, 15000, new RetryOneTime(200));
        client.start();
        client.blockUntilConnected();
        try {
            switch (recipe) {
                case "mutex":
                case "write":
                case "read": {
                    InterProcessLock lock;
                    if (recipe.equals("mutex")) {
                        lock = new InterProcessMutex(client, path);
                    } else if (recipe.equals("write")) {
                        lock = new InterProcessReadWriteLock(client, path).writeLock();
                    } else {
                        lock = new InterProcessReadWriteLock(client, path).readLock();
                    }
                    say("waiting");
                    lock.acquire();
                    say("held");
                    awaitRelease(in);
                    lock.release();
                    break;
                }
                case "latch": {
                    LeaderLatch latch = new LeaderLatch(client, path, "curator");
                    latch.start();
                    say("waiting");
                    latch.await();
                    say("held");
                    awaitRelease(in);
                    latch.close();
                    break;
                }
                case "selector": {
                    CountDownLatch release = new CountDownLatch(1);
                    CountDownLatch done = new CountDownLatch(1);
                    LeaderSelector sel = new LeaderSelector(client, path, new LeaderSelectorListenerAdapter() {
                        @Override
                        public void takeLeadership(CuratorFramework c) throws Exception {
                            say("held");
                            release.await();
                        }
                    });
                    sel.start();
                    say("waiting");
                    awaitRelease(in);
                    release.countDown();
                    sel.close();
                    break;
                }
                default:
                    say("error unknown recipe " + recipe);
                    System.exit(2);
            }
            say("released");
        } catch (Exception e) {
            say("error " + e);
            System.exit(1);
        } finally {
            client.close();
        }
    }
}

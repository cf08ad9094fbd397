import java.io.FileInputStream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipInputStream;

/** Reads a zip with Java's ZipInputStream (which refuses stored entries that
 *  use a data descriptor) and prints "name size method" per entry. */
public class ZipCheck {
    public static void main(String[] args) throws Exception {
        try (ZipInputStream zip = new ZipInputStream(new FileInputStream(args[0]))) {
            byte[] buffer = new byte[1 << 16];
            ZipEntry entry;
            while ((entry = zip.getNextEntry()) != null) {
                long size = 0;
                int n;
                while ((n = zip.read(buffer)) > 0) size += n;
                System.out.println(entry.getName() + " " + size + " " + entry.getMethod());
            }
        }
    }
}
